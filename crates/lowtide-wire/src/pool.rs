//! A pool of packet buffers that are reused instead of freed (issue 14).
//!
//! A 64 KB GSO packet built, sent and freed per packet makes glibc's allocator give the
//! top of the heap back to the kernel (`M_TRIM_THRESHOLD`, 128 KB) and fault fresh
//! zeroed pages in for the next one: on the TUN path that was about 40 % of the
//! sending CPU. Linux keeps per-CPU caches of skb heads and pages for the same reason
//! (`napi_skb_cache_get`, `page_pool`). Here, every buffer of at least
//! [`POOL_LARGE_MIN`] bytes is taken from the pool with the capacity of the largest
//! packet ([`POOL_BUF_LEN`]) and given back when its packet is done (sent, written to
//! the device, merged or received), so in steady state no packet buffer is allocated
//! or freed. Smaller packets (ACKs, MSS-sized segments) get buffers of
//! [`POOL_MIN_LEN`] bytes from a second free list.

/// Packets shorter than this (a 1500-byte MTU segment, an ACK) use buffers of this
/// capacity from the small list.
pub const POOL_MIN_LEN: usize = 2048;

/// Packets at least this long (GSO packets) use the large buffers. Packets between
/// the two sizes (e.g. jumbo-MTU segments) are allocated to size: a 64 KB buffer each
/// would waste most of it.
pub const POOL_LARGE_MIN: usize = 12 * 1024;

/// Small buffers a pool keeps at most (16 MB).
pub const POOL_MAX_SMALL: usize = 8192;

/// Capacity of a pooled buffer: the longest IP packet, an IPv6 header plus a
/// 65,535-byte payload, and the 10-byte `virtio_net_hdr` in front of TUN packets.
pub const POOL_BUF_LEN: usize = 10 + 40 + 65_535;

/// Buffers a pool keeps at most (about 16 MB); more are freed.
pub const POOL_MAX_BUFFERS: usize = 256;

/// Free packet buffers, each with capacity [`POOL_BUF_LEN`] (see the module docs).
#[derive(Debug, Default)]
pub struct BufPool {
    free: Vec<Vec<u8>>,
    small: Vec<Vec<u8>>,
}

impl BufPool {
    /// An empty pool.
    pub fn new() -> BufPool {
        BufPool::default()
    }

    /// An empty buffer (length 0) with room for at least `len` bytes: a pooled one of
    /// [`POOL_MIN_LEN`] bytes for a shorter packet, of [`POOL_BUF_LEN`] from
    /// [`POOL_LARGE_MIN`] up to that, a new one of `len` bytes otherwise.
    pub fn take(&mut self, len: usize) -> Vec<u8> {
        let (list, cap) = match len {
            0..POOL_MIN_LEN => (&mut self.small, POOL_MIN_LEN),
            POOL_LARGE_MIN..=POOL_BUF_LEN => (&mut self.free, POOL_BUF_LEN),
            _ => return Vec::with_capacity(len),
        };
        match list.pop() {
            Some(mut b) => {
                b.clear();
                b
            }
            None => Vec::with_capacity(cap),
        }
    }

    /// Gives a buffer back: kept if it has a pooled buffer's capacity and its list is
    /// not full, freed otherwise.
    pub fn give(&mut self, buf: Vec<u8>) {
        if buf.capacity() >= POOL_BUF_LEN {
            if self.free.len() < POOL_MAX_BUFFERS {
                self.free.push(buf);
            }
        } else if buf.capacity() >= POOL_MIN_LEN && self.small.len() < POOL_MAX_SMALL {
            self.small.push(buf);
        }
    }

    /// Buffers held.
    pub fn len(&self) -> usize {
        self.free.len() + self.small.len()
    }

    /// No buffer held.
    pub fn is_empty(&self) -> bool {
        self.free.is_empty() && self.small.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_buffers_have_their_own_list() {
        let mut p = BufPool::new();
        let a = p.take(66);
        assert_eq!(a.capacity(), POOL_MIN_LEN);
        let ptr = a.as_ptr();
        p.give(a);
        let big = p.take(50_000);
        assert!(
            big.capacity() >= POOL_BUF_LEN,
            "a large packet never gets a small one"
        );
        let b = p.take(1500);
        assert_eq!(b.as_ptr(), ptr);
        // A buffer too small for either list is not kept.
        p.give(Vec::with_capacity(100));
        assert!(p.is_empty());
    }

    #[test]
    fn large_buffers_are_reused() {
        let mut p = BufPool::new();
        let mut a = p.take(60_000);
        assert!(a.capacity() >= POOL_BUF_LEN);
        a.extend_from_slice(&[7; 100]);
        let ptr = a.as_ptr();
        p.give(a);
        assert_eq!(p.len(), 1);
        let b = p.take(POOL_LARGE_MIN);
        assert_eq!((b.as_ptr(), b.len()), (ptr, 0), "the same buffer, emptied");
        // Between the two classes: allocated to size.
        assert_eq!(p.take(9000).capacity(), 9000);
        // Too large for a pooled buffer: allocated to size.
        assert!(p.take(POOL_BUF_LEN + 1).capacity() > POOL_BUF_LEN);
    }

    #[test]
    fn the_pool_is_bounded() {
        let mut p = BufPool::new();
        let bufs: Vec<_> = (0..POOL_MAX_BUFFERS + 5).map(|_| p.take(50_000)).collect();
        for b in bufs {
            p.give(b);
        }
        assert_eq!(p.len(), POOL_MAX_BUFFERS);
    }
}
