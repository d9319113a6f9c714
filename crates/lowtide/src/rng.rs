//! The stack's only source of randomness: a seeded ChaCha8 stream, so that a run is
//! reproducible from its seed.

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

/// A deterministic random number generator owned by one stack.
#[derive(Debug, Clone)]
pub struct Rng(ChaCha8Rng);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(ChaCha8Rng::seed_from_u64(seed))
    }
    /// A generator keyed with 32 bytes (e.g. from the OS random source).
    pub fn from_key(key: [u8; 32]) -> Rng {
        Rng(ChaCha8Rng::from_seed(key))
    }
    /// 32 random bytes.
    pub fn key(&mut self) -> [u8; 32] {
        let mut k = [0u8; 32];
        self.0.fill_bytes(&mut k);
        k
    }
    /// A uniformly random u32.
    pub fn next_u32(&mut self) -> u32 {
        self.0.next_u32()
    }
    /// A uniformly random u64.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }
    /// A value in `lo..=hi`.
    pub fn range_u32(&mut self, lo: u32, hi: u32) -> u32 {
        debug_assert!(lo <= hi);
        let span = (hi - lo) as u64 + 1;
        lo + ((self.next_u32() as u64 * span) >> 32) as u32
    }
}
