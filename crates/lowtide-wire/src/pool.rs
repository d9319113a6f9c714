//! A pool of packet buffers that are reused instead of freed (issue 14).
//!
//! A 64 KB GSO packet built, sent and freed per packet makes glibc's allocator give the
//! top of the heap back to the kernel (`M_TRIM_THRESHOLD`, 128 KB) and fault fresh
//! zeroed pages in for the next one: on the TUN path that was about 40 % of the
//! sending CPU. Linux keeps per-CPU caches of skb heads and pages for the same reason
//! (`napi_skb_cache_get`, `page_pool`). Here, every buffer of at least
//! [`POOL_MIN_LEN`] bytes is taken from the pool with the capacity of the largest
//! packet ([`POOL_BUF_LEN`]) and given back when its packet is done (sent, written to
//! the device, merged or received), so in steady state no packet buffer is allocated
//! or freed. Smaller packets (ACKs, single MSS-sized segments) come from the allocator,
//! whose per-thread caches serve them without touching the kernel.

/// Packets at least this long use pooled buffers.
pub const POOL_MIN_LEN: usize = 2048;

/// Capacity of a pooled buffer: the longest IP packet, an IPv6 header plus a
/// 65,535-byte payload, and the 10-byte `virtio_net_hdr` in front of TUN packets.
pub const POOL_BUF_LEN: usize = 10 + 40 + 65_535;

/// Buffers a pool keeps at most (about 16 MB); more are freed.
pub const POOL_MAX_BUFFERS: usize = 256;

/// Free packet buffers, each with capacity [`POOL_BUF_LEN`] (see the module docs).
#[derive(Debug, Default)]
pub struct BufPool {
    free: Vec<Vec<u8>>,
}

impl BufPool {
    /// An empty pool.
    pub fn new() -> BufPool {
        BufPool::default()
    }

    /// An empty buffer (length 0) with room for at least `len` bytes: a pooled one if
    /// `len` is at least [`POOL_MIN_LEN`] and at most [`POOL_BUF_LEN`].
    pub fn take(&mut self, len: usize) -> Vec<u8> {
        if !(POOL_MIN_LEN..=POOL_BUF_LEN).contains(&len) {
            return Vec::with_capacity(len);
        }
        match self.free.pop() {
            Some(mut b) => {
                b.clear();
                b
            }
            None => Vec::with_capacity(POOL_BUF_LEN),
        }
    }

    /// Gives a buffer back: kept if it has a pooled buffer's capacity and the pool is
    /// not full, freed otherwise.
    pub fn give(&mut self, buf: Vec<u8>) {
        if buf.capacity() >= POOL_BUF_LEN && self.free.len() < POOL_MAX_BUFFERS {
            self.free.push(buf);
        }
    }

    /// Buffers held.
    pub fn len(&self) -> usize {
        self.free.len()
    }

    /// No buffer held.
    pub fn is_empty(&self) -> bool {
        self.free.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_buffers_are_reused_small_ones_are_not() {
        let mut p = BufPool::new();
        let mut a = p.take(60_000);
        assert!(a.capacity() >= POOL_BUF_LEN);
        a.extend_from_slice(&[7; 100]);
        let ptr = a.as_ptr();
        p.give(a);
        assert_eq!(p.len(), 1);
        let b = p.take(POOL_MIN_LEN);
        assert_eq!((b.as_ptr(), b.len()), (ptr, 0), "the same buffer, emptied");
        // Small packets come from the allocator and are not kept.
        let s = p.take(100);
        assert!(s.capacity() < POOL_BUF_LEN);
        p.give(s);
        assert!(p.is_empty());
        // Too large for a pooled buffer: allocated to size.
        assert!(p.take(POOL_BUF_LEN + 1).capacity() > POOL_BUF_LEN);
    }

    #[test]
    fn the_pool_is_bounded() {
        let mut p = BufPool::new();
        let bufs: Vec<_> = (0..POOL_MAX_BUFFERS + 5).map(|_| p.take(5000)).collect();
        for b in bufs {
            p.give(b);
        }
        assert_eq!(p.len(), POOL_MAX_BUFFERS);
    }
}
