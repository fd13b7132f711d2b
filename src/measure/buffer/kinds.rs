//! The allocation policy of probes that compare page kinds: one buffer per kind, keeping only
//! those whose request took, and a record of what became of every kind asked for.

use super::{Buffer, BufferError, PageKind, PageKindOutcome};

/// One buffer per page kind, for probes that compare kinds.
#[derive(Debug, Default)]
pub struct KindBuffers {
    /// The buffers whose request took, in the order asked.
    pub buffers: Vec<Buffer>,
    /// What happened to every kind asked for, for `effects.page_kinds`.
    pub records: Vec<PageKindOutcome>,
}

impl KindBuffers {
    /// The notes of the kinds that could not be allocated (the tests' view of a skip).
    #[cfg(test)]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kind_that_cannot_be_allocated_is_recorded_without_took() {
        // Regression: a THP buffer refused for lack of memory (the 4 KiB one took it) was
        // recorded as {"took": false}, which the huge-pages verdict read as THP not taking.
        let kb = allocate_kinds(&[PageKind::Base4k, PageKind::Thp], |kind| match kind {
            PageKind::Base4k => Buffer::allocate(1 << 20, kind),
            _ => Err(BufferError::NotEnoughMemory {
                requested: 16 << 30,
                available: 1 << 30,
                bound: crate::machine::meminfo::MemoryBound::Available,
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
}
