//! A fast, non-cryptographic hasher for the wall-clock view's maps keyed by call stacks.
//!
//! With the standard library's SipHash, hashing each preemption's stack (a `Vec` of
//! locations, each with its file's path) was a fifth of `diagnose`'s own CPU time attached to
//! MariaDB under sysbench (36,000 switches a second; `perf record` of diagnose, issue 30). The
//! keys come from this process's own recording, not from an adversary, so the hash needs no
//! resistance to collisions chosen on purpose: this is the multiply-rotate hash of rustc's
//! `FxHasher` (Firefox's), a word at a time.

use std::hash::{BuildHasher, Hasher};

/// Builds [`FxHasher`]s.
#[derive(Debug, Clone, Copy, Default)]
pub struct FxBuild;

impl BuildHasher for FxBuild {
    type Hasher = FxHasher;
    fn build_hasher(&self) -> FxHasher {
        FxHasher(0)
    }
}

/// The hasher: each word rotated in and multiplied by a large odd constant.
#[derive(Debug, Clone, Copy, Default)]
pub struct FxHasher(u64);

/// rustc-hash's 64-bit seed (from the golden ratio).
const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(last));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A `HashMap` with [`FxBuild`].
pub type FxHashMap<K, V> = std::collections::HashMap<K, V, FxBuild>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_keys_hash_equal_and_different_ones_apart() {
        let h = |s: &str| FxBuild.hash_one(s);
        assert_eq!(h("/usr/sbin/mariadbd"), h("/usr/sbin/mariadbd"));
        assert_ne!(h("/usr/sbin/mariadbd"), h("/usr/sbin/mariadbe"));
        assert_ne!(h("abcdefgh1"), h("abcdefgh2"));
        let mut m: FxHashMap<Vec<u64>, u64> = FxHashMap::default();
        for i in 0..1000u64 {
            *m.entry(vec![i, i / 2]).or_default() += 1;
        }
        assert_eq!(m.len(), 1000);
    }
}
