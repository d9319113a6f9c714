//! `struct sk_buff` as the receive side charges it (include/linux/skbuff.h,
//! net/core/skbuff.c `skb_try_coalesce`, drivers/net/tun.c `tun_alloc_skb`): the
//! truesize of each received buffer and how a later segment joins it. tcp/rmem.rs
//! charges it to the socket; the queues (tcp/rcvqueue.rs, tcp/ofo.rs) keep it.
//!
//! A received segment of `len` bytes sits in a driver buffer holding the headers and
//! headroom ([`MAX_TCP_HEADER`]) and the payload, cache-aligned (`SKB_DATA_ALIGN`),
//! plus `SKB_TRUESIZE`'s fixed part: `SKB_DATA_ALIGN(sizeof(struct sk_buff))` (256 on
//! x86_64) and `SKB_DATA_ALIGN(sizeof(struct skb_shared_info))` (320):
//! `truesize = SKB_DATA_ALIGN(MAX_TCP_HEADER + len) + 256 + 320` ([`rx_truesize`];
//! 1448 bytes cost 2304, what this machine's 6.18 kernel charges over veth; 1 byte
//! costs 896). A GRO packet costs one such buffer per segment. A buffer that
//! `tcp_collapse` allocates (`alloc_skb(len)`) costs its head (the small-head
//! cache's, or `kmalloc_size_roundup(SKB_DATA_ALIGN(len) + 320)`) plus 256
//! ([`alloc_skb`]), and keeps the rest of its head as tailroom.
//! A single segment that continues the buffer before it (the receive queue's tail,
//! `tcp_queue_rcv`; its out-of-order predecessor, `tcp_ooo_try_coalesce`) is
//! coalesced into it as `skb_try_coalesce` steals a page-fragment head: the
//! `struct sk_buff` is freed (`COALESCE_SAVING` less), up to `MAX_SKB_FRAGS`
//! heads per buffer. The bytes stay where they are; only the charge follows Linux.

use super::consts::MAX_TCP_HEADER;

/// `SKB_DATA_ALIGN(sizeof(struct sk_buff))` on x86_64.
const SKB_STRUCT: u32 = 256;
/// `SKB_DATA_ALIGN(sizeof(struct skb_shared_info))` on x86_64.
const SKB_SHINFO: u32 = 320;
/// `SKB_TRUESIZE(x)`: `x` bytes of data plus the skb's fixed overhead; what
/// `sock_omalloc` checks against `optmem_max` before it knows the real truesize.
pub(crate) const fn skb_truesize(x: u32) -> u32 {
    x + SKB_STRUCT + SKB_SHINFO
}
/// `SMP_CACHE_BYTES`, `SKB_DATA_ALIGN`'s unit.
const SMP_CACHE_BYTES: u32 = 64;
/// `SKB_MAX_ORDER(0, 0)` = `SKB_WITH_OVERHEAD(PAGE_SIZE)`: the payload of a one-page
/// buffer, the most `tcp_collapse` puts in one.
pub const SKB_MAX_ORDER0: u32 = 4096 - SKB_SHINFO;

/// What a coalesced segment is charged less (`skb_try_coalesce`, head stolen:
/// `delta = from->truesize - SKB_DATA_ALIGN(sizeof(struct sk_buff))`).
pub(crate) const COALESCE_SAVING: u32 = SKB_STRUCT;
/// `MAX_SKB_FRAGS`: frags one skb holds, so heads one buffer takes in.
pub(crate) const MAX_SKB_FRAGS: u8 = 17;

/// `SKB_DATA_ALIGN`.
fn skb_data_align(x: u32) -> u32 {
    x.div_ceil(SMP_CACHE_BYTES) * SMP_CACHE_BYTES
}

/// Truesize of one received segment of `len` payload bytes (see the module docs).
pub fn rx_truesize(len: u32) -> u32 {
    skb_data_align(MAX_TCP_HEADER + len) + SKB_STRUCT + SKB_SHINFO
}

/// `kmalloc_size_roundup`: the size class `kmalloc` serves `size` from (slab caches
/// up to 8 KB, whole pages beyond).
fn kmalloc_size_roundup(size: u32) -> u32 {
    const CLASSES: [u32; 13] = [
        8, 16, 32, 64, 96, 128, 192, 256, 512, 1024, 2048, 4096, 8192,
    ];
    CLASSES
        .iter()
        .copied()
        .find(|&c| c >= size)
        .unwrap_or_else(|| size.next_power_of_two())
}

/// Truesize of `alloc_skb(len)` ([`alloc_skb`]).
pub fn alloc_truesize(len: u32) -> u32 {
    alloc_skb(len).truesize
}

/// The buffer `alloc_skb(len)` makes and fills with `len` bytes (`tcp_collapse`'s
/// `nskb`): `__alloc_skb` takes the head from `kmalloc_reserve` (the small-head
/// cache for a head that fits it, else `kmalloc`) and charges `SKB_TRUESIZE` of
/// what it got; the head is `kmalloc`ed (locked: it cannot be stolen) and what the
/// bytes leave of it is tailroom a later segment may be copied into.
pub fn alloc_skb(len: u32) -> RxSkb {
    let osize = kmalloc_head(len);
    RxSkb {
        truesize: osize + SKB_STRUCT,
        head: RxHead::Linear {
            tailroom: osize - SKB_SHINFO - len,
        },
    }
}

/// `NET_SKB_PAD`: the headroom a device reserves before a received packet.
const NET_SKB_PAD: u32 = 64;
/// `PAGE_SIZE`.
const PAGE_SIZE: u32 = 4096;
/// `PAGE_ALLOC_COSTLY_ORDER`: the largest page order `tun_alloc_skb` asks for.
const PAGE_ALLOC_COSTLY_ORDER: u32 = 3;
/// `good_linear` in `tun_get_user`: `SKB_MAX_HEAD(NET_SKB_PAD)`, the most of a
/// packet a one-page head holds.
const TUN_GOOD_LINEAR: u32 = PAGE_SIZE - NET_SKB_PAD - SKB_SHINFO;
/// `SKB_SMALL_HEAD_CACHE_SIZE`: `kmalloc_reserve` serves heads up to
/// `SKB_HEAD_ALIGN(MAX_TCP_HEADER)` from its own cache of that size.
const SKB_SMALL_HEAD_CACHE_SIZE: u32 = MAX_TCP_HEADER + SKB_SHINFO;

/// How the device allocates the buffer (skb) of a received packet, which decides what
/// it is charged (`skb->truesize`) and how a later segment joins it
/// (`skb_try_coalesce`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum RxAlloc {
    /// A NIC driver's page-fragment buffers, one per segment of a GRO packet
    /// ([`rx_truesize`]; veth on this machine's 6.18): a later single segment's head
    /// is stolen into the buffer before it.
    #[default]
    PageFrag,
    /// A TUN device without `IFF_NAPI` or a virtio-net header, as packetdrill's
    /// (drivers/net/tun.c `tun_get_user`, `tun_alloc_skb`): a packet under a page is
    /// one linear head `alloc_skb` takes from `kmalloc`, `NET_SKB_PAD` plus the whole
    /// IP packet (1000 bytes of payload cost 2304, as this machine's kernel charges
    /// them through packetdrill's tun); a later segment that fits in its tailroom is
    /// copied there at no charge, else it stays a buffer of its own (a `kmalloc`ed
    /// head cannot be stolen). A larger packet is a small head plus page frags.
    Tun,
}

/// A received packet's buffer, as [`RxAlloc`] makes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxSkb {
    /// `skb->truesize`.
    pub truesize: u32,
    /// How it may join the buffer before it.
    pub head: RxHead,
}

/// The head of a received buffer, for `skb_try_coalesce`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxHead {
    /// A page fragment: a single segment's (`single`) head joins the buffer before it
    /// as a frag, the `struct sk_buff` alone freed (`COALESCE_SAVING`).
    PageFrag {
        /// One segment (not a GRO packet of several).
        single: bool,
    },
    /// A `kmalloc`ed linear head with `tailroom` bytes free after the payload.
    Linear {
        /// `skb_tailroom`.
        tailroom: u32,
    },
}

/// The state of the buffer a later segment may join (a queue's tail, or an
/// out-of-order segment's): what `skb_try_coalesce` looks at in `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CoalesceTo {
    /// Frags it holds.
    pub frags: u8,
    /// Its tailroom, if its head is linear.
    pub tailroom: Option<u32>,
}

impl RxSkb {
    /// A NIC's buffer of `truesize` ([`RxAlloc::PageFrag`]), of one segment or not.
    pub fn page_frag(truesize: u32, single: bool) -> RxSkb {
        RxSkb {
            truesize,
            head: RxHead::PageFrag { single },
        }
    }

    /// `skb_try_coalesce(to, self)` for `len` payload bytes: the charge if it joins
    /// `to` (updated), or None (then `to` should become [`RxSkb::as_to`]).
    pub fn coalesce_into(&self, to: &mut CoalesceTo, len: u32) -> Option<u32> {
        self.coalesce_frags_into(to, len, 0)
    }

    /// [`RxSkb::coalesce_into`] for a buffer that holds `frags` frags beside its
    /// head (segments coalesced into it before): a stolen head takes them along,
    /// so `to` must have room for all of them ("`to_shinfo->nr_frags +
    /// from_shinfo->nr_frags >= MAX_SKB_FRAGS`": no).
    pub fn coalesce_frags_into(&self, to: &mut CoalesceTo, len: u32, frags: u8) -> Option<u32> {
        // "if (len <= skb_tailroom(to))": copied, no truesize added. A paged skb's
        // tailroom is 0 (skb_tailroom of a nonlinear skb), which a zero-length skb
        // (a bare FIN) still fits: it always joins.
        if len <= to.tailroom.unwrap_or(0) {
            to.tailroom = to.tailroom.map(|room| room - len);
            return Some(0);
        }
        match self.head {
            RxHead::PageFrag { single: true } if to.frags + frags < MAX_SKB_FRAGS => {
                to.frags += 1 + frags;
                Some(self.truesize.saturating_sub(COALESCE_SAVING))
            }
            _ => None,
        }
    }

    /// The buffer as later segments see it when it is the tail.
    pub fn as_to(&self) -> CoalesceTo {
        match self.head {
            RxHead::PageFrag { .. } => CoalesceTo::default(),
            RxHead::Linear { tailroom } => CoalesceTo {
                frags: 0,
                tailroom: Some(tailroom),
            },
        }
    }
}

/// `alloc_skb(size)`'s head from `kmalloc_reserve`: the size it gets.
fn kmalloc_head(size: u32) -> u32 {
    let obj = skb_data_align(size) + SKB_SHINFO;
    match obj <= SKB_SMALL_HEAD_CACHE_SIZE {
        true => SKB_SMALL_HEAD_CACHE_SIZE,
        false => kmalloc_size_roundup(obj),
    }
}

/// The buffer `tun_alloc_skb` makes for an IP packet of `pkt` bytes (see
/// [`RxAlloc::Tun`]).
pub fn tun_skb(pkt: u32) -> RxSkb {
    if NET_SKB_PAD + pkt < PAGE_SIZE {
        // "Under a page?  Don't bother with paged skb."
        let osize = kmalloc_head(NET_SKB_PAD + pkt);
        return RxSkb {
            truesize: osize + SKB_STRUCT,
            head: RxHead::Linear {
                tailroom: osize - SKB_SHINFO - NET_SKB_PAD - pkt,
            },
        };
    }
    // tun_get_user (Linux 6.6+, "tun: avoid high-order page allocation for packet
    // header"): without a header length in the virtio-net header, the head takes
    // `good_linear` (SKB_MAX_HEAD(NET_SKB_PAD)) bytes of the packet, the rest goes
    // in pages (sock_alloc_send_pskb, alloc_skb_with_frags: the largest order up to
    // PAGE_ALLOC_COSTLY_ORDER that the rest fills). The kmalloc'ed head is locked
    // (skb_head_is_locked), and a paged skb has no tailroom: it joins nothing.
    let linear = TUN_GOOD_LINEAR.min(pkt);
    let (mut left, mut truesize) = (
        pkt - linear,
        kmalloc_head(NET_SKB_PAD + linear) + SKB_STRUCT,
    );
    while left > 0 {
        let mut order = PAGE_ALLOC_COSTLY_ORDER;
        while order > 0 && left.next_multiple_of(PAGE_SIZE) < PAGE_SIZE << order {
            order -= 1;
        }
        left -= left.min(PAGE_SIZE << order);
        truesize += PAGE_SIZE << order;
    }
    RxSkb {
        truesize,
        head: RxHead::Linear { tailroom: 0 },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `tun_alloc_skb` for packets under a page: one `kmalloc`ed head of
    /// `NET_SKB_PAD` + the packet; the 1000-byte payload with a timestamp (1052-byte
    /// packet) costs 2304 as this machine's 6.18 charges it through packetdrill's tun
    /// (scaling_ratio 111), as a full 1500-byte packet does; a pure ACK's head comes
    /// from the small-head cache.
    #[test]
    fn tun_skbs_as_kmalloc_heads() {
        let s = tun_skb(1052);
        assert_eq!(s.truesize, 2304);
        assert_eq!(
            s.head,
            RxHead::Linear {
                tailroom: 2048 - 320 - 64 - 1052
            }
        );
        assert_eq!(tun_skb(1500).truesize, 2304);
        assert_eq!(tun_skb(352).truesize, 1024 + 256);
        assert_eq!(tun_skb(52).truesize, SKB_SMALL_HEAD_CACHE_SIZE + 256);
        // A packet of a page or more: `good_linear` (3712) bytes in a one-page head,
        // the rest in the largest pages it fills. 4500 bytes of payload cost 8448
        // (scaling_ratio 136), as this machine's kernel measures them through
        // packetdrill's tun.
        assert_eq!(TUN_GOOD_LINEAR, 3712);
        assert_eq!(tun_skb(4540).truesize, 4096 + 256 + 4096);
        let big = tun_skb(10052);
        assert_eq!(big.truesize, 4096 + 256 + 8192);
        assert_eq!(big.head, RxHead::Linear { tailroom: 0 });
        let mut to = big.as_to();
        assert_eq!(tun_skb(152).coalesce_into(&mut to, 100), None);
    }

    /// `alloc_skb` (`tcp_collapse`'s buffers): a head that fits the small-head cache
    /// comes from it, a larger one from `kmalloc`; the rest of the head is tailroom.
    #[test]
    fn alloc_skb_heads_and_tailroom() {
        let s = alloc_skb(100);
        assert_eq!(s.truesize, 576 + 256);
        assert_eq!(
            s.head,
            RxHead::Linear {
                tailroom: 576 - 320 - 100
            }
        );
        let s = alloc_skb(500);
        assert_eq!((s.truesize, s.as_to().tailroom), (1024 + 256, Some(204)));
        let s = alloc_skb(SKB_MAX_ORDER0);
        assert_eq!((s.truesize, s.as_to().tailroom), (4096 + 256, Some(0)));
    }

    /// `skb_try_coalesce`: a segment that fits in the tail's tailroom is copied there
    /// for nothing; a kmalloc'ed head that does not fit stays apart; a page-fragment
    /// head is stolen (the `struct sk_buff` freed), up to `MAX_SKB_FRAGS`.
    #[test]
    fn coalesce_by_tailroom_or_stolen_head() {
        let mut to = tun_skb(1052).as_to();
        let small = tun_skb(152);
        assert_eq!(small.coalesce_into(&mut to, 100), Some(0));
        assert_eq!(to.tailroom, Some(612 - 100));
        assert_eq!(tun_skb(1052).coalesce_into(&mut to, 1000), None);
        let mut to = RxSkb::page_frag(2304, true).as_to();
        for _ in 0..MAX_SKB_FRAGS {
            let c = RxSkb::page_frag(2304, true).coalesce_into(&mut to, 1448);
            assert_eq!(c, Some(2304 - COALESCE_SAVING));
        }
        assert_eq!(
            RxSkb::page_frag(2304, true).coalesce_into(&mut to, 1448),
            None
        );
        assert_eq!(
            RxSkb::page_frag(4608, false).coalesce_into(&mut CoalesceTo::default(), 2896),
            None
        );
    }
}
