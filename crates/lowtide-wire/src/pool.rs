//! A pool of packet buffers that are reused instead of freed (issue 14).
//!
//! A 64 KB GSO packet built, sent and freed per packet makes glibc's allocator give the
//! top of the heap back to the kernel (`M_TRIM_THRESHOLD`, 128 KB) and fault fresh
//! zeroed pages in for the next one: on the TUN path that was about 40 % of the
//! sending CPU. Linux keeps per-CPU caches of skb heads and pages for the same reason
//! (`napi_skb_cache_get`, `page_pool`). Here, packet buffers come in four sizes,
//! each with its free list: [`POOL_TINY_LEN`] (headers alone: ACKs, the heads of
//! segments whose payload lies elsewhere), [`POOL_MIN_LEN`] (MSS-sized segments),
//! [`POOL_MID_LEN`] and the largest packet, [`POOL_BUF_LEN`]; each is taken from its
//! list and given back when its packet is done (sent, written to the device, merged
//! or received), so in steady state no packet buffer is allocated or freed.

/// Packets up to this long (IP and TCP headers with options: an ACK, a segment's
/// headers) use buffers of this capacity from the tiny list. Kept small so that the
/// headers of thousands of segments in flight lie densely in memory, not one per 2 KB.
pub const POOL_TINY_LEN: usize = 128;

/// Longer packets up to this (a 1500-byte MTU segment) use buffers of this capacity
/// from the small list.
pub const POOL_MIN_LEN: usize = 2048;

/// Packets from [`POOL_MIN_LEN`] up to this long (a few segments, a jumbo-MTU
/// segment) use buffers of this capacity from the medium list; longer ones (GSO
/// packets) the large buffers.
pub const POOL_MID_LEN: usize = 16 * 1024;

/// Capacity of a pooled buffer: the longest IP packet, an IPv6 header plus a
/// 65,535-byte payload, and the 10-byte `virtio_net_hdr` in front of TUN packets.
pub const POOL_BUF_LEN: usize = 10 + 40 + 65_535;

/// Large buffers a pool keeps at most (about 16 MB); more are freed.
pub const POOL_MAX_BUFFERS: usize = 256;

/// Medium buffers a pool keeps at most (16 MB).
pub const POOL_MAX_MID: usize = 1024;

/// Small buffers a pool keeps at most (16 MB).
pub const POOL_MAX_SMALL: usize = 8192;

/// Tiny buffers a pool keeps at most (4 MB).
pub const POOL_MAX_TINY: usize = 32768;

/// Free packet buffers of four sizes (see the module docs).
#[derive(Debug, Default)]
pub struct BufPool {
    free: Vec<Vec<u8>>,
    mid: Vec<Vec<u8>>,
    small: Vec<Vec<u8>>,
    tiny: Vec<Vec<u8>>,
}

impl BufPool {
    /// An empty pool.
    pub fn new() -> BufPool {
        BufPool::default()
    }

    /// An empty buffer (length 0) with room for at least `len` bytes: a pooled one of
    /// the smallest of the four sizes that holds `len`, a new one of `len` bytes
    /// beyond [`POOL_BUF_LEN`].
    pub fn take(&mut self, len: usize) -> Vec<u8> {
        let (list, cap) = match len {
            _ if len <= POOL_TINY_LEN => (&mut self.tiny, POOL_TINY_LEN),
            _ if len < POOL_MIN_LEN => (&mut self.small, POOL_MIN_LEN),
            POOL_MIN_LEN..=POOL_MID_LEN => (&mut self.mid, POOL_MID_LEN),
            _ if len <= POOL_BUF_LEN => (&mut self.free, POOL_BUF_LEN),
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

    /// Gives a buffer back: kept in the list of the largest size its capacity holds,
    /// unless that list is full; freed otherwise.
    pub fn give(&mut self, buf: Vec<u8>) {
        let (list, max) = match buf.capacity() {
            c if c >= POOL_BUF_LEN => (&mut self.free, POOL_MAX_BUFFERS),
            c if c >= POOL_MID_LEN => (&mut self.mid, POOL_MAX_MID),
            c if c >= POOL_MIN_LEN => (&mut self.small, POOL_MAX_SMALL),
            c if c >= POOL_TINY_LEN => (&mut self.tiny, POOL_MAX_TINY),
            _ => return,
        };
        if list.len() < max {
            list.push(buf);
        }
    }

    /// Buffers held.
    pub fn len(&self) -> usize {
        self.free.len() + self.mid.len() + self.small.len() + self.tiny.len()
    }

    /// No buffer held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_buffers_have_their_own_list() {
        let mut p = BufPool::new();
        let a = p.take(1000);
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
        // A buffer too small for any list is not kept.
        p.give(Vec::with_capacity(100));
        assert!(p.is_empty());
    }

    #[test]
    fn headers_get_tiny_buffers_of_their_own() {
        let mut p = BufPool::new();
        let a = p.take(66);
        assert_eq!(a.capacity(), POOL_TINY_LEN);
        let ptr = a.as_ptr();
        p.give(a);
        assert_eq!(p.take(POOL_TINY_LEN + 1).capacity(), POOL_MIN_LEN);
        let b = p.take(100);
        assert_eq!(b.as_ptr(), ptr, "reused");
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
        let b = p.take(POOL_MID_LEN + 1);
        assert_eq!((b.as_ptr(), b.len()), (ptr, 0), "the same buffer, emptied");
        // A jumbo segment: a medium buffer.
        assert_eq!(p.take(9000).capacity(), POOL_MID_LEN);
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
