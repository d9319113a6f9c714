//! Receive memory as Linux charges and bounds it (tcp_input.c `tcp_try_rmem_schedule`,
//! `tcp_can_ingest`, `tcp_prune_queue`, `tcp_clamp_window`, `tcp_collapse_ofo_queue`,
//! `tcp_collapse`, `tcp_prune_ofo_queue`).
//!
//! Every queued buffer, in order or out of order, is charged a truesize into
//! `sk_rmem_alloc` (`Tcb::rmem_alloc`). The model (include/linux/skbuff.h):
//! a received segment of `len` bytes sits in a driver buffer holding the headers and
//! headroom ([`MAX_TCP_HEADER`]) and the payload, cache-aligned (`SKB_DATA_ALIGN`),
//! plus `SKB_TRUESIZE`'s fixed part: `SKB_DATA_ALIGN(sizeof(struct sk_buff))` (256 on
//! x86_64) and `SKB_DATA_ALIGN(sizeof(struct skb_shared_info))` (320):
//! `truesize = SKB_DATA_ALIGN(MAX_TCP_HEADER + len) + 256 + 320` ([`rx_truesize`];
//! 1448 bytes cost 2304, what this machine's 6.18 kernel charges over veth; 1 byte
//! costs 896). A GRO packet costs one such buffer per segment. A buffer that
//! `tcp_collapse` allocates (`alloc_skb(len)`) costs its `kmalloc` size
//! (`kmalloc_size_roundup(SKB_DATA_ALIGN(len) + 320)`) plus 256 ([`alloc_truesize`]).
//! A single segment that continues the buffer before it (the receive queue's tail,
//! `tcp_queue_rcv`; its out-of-order predecessor, `tcp_ooo_try_coalesce`) is
//! coalesced into it as `skb_try_coalesce` steals a page-fragment head: the
//! `struct sk_buff` is freed (`COALESCE_SAVING` less), up to `MAX_SKB_FRAGS`
//! heads per buffer. The bytes stay where they are; only the charge follows Linux.
//!
//! The window follows from the same charge: `scaling_ratio` is measured from
//! `Tcb::rcv_truesize` (tcp/rcvwin.rs, Linux 6.5+ `tcp_measure_rcv_mss`).
//! A segment must also find pages under the stack-wide `tcp_mem`
//! (`sk_rmem_schedule`, tcp/mem.rs); under memory pressure the window is held to
//! four segments (`tcp_adjust_rcv_ssthresh`).

use super::consts::MAX_TCP_HEADER;
use super::mem::MemKind;
use super::sock::Tcb;
use super::Ctx;
use crate::mib::Mib;

/// `SKB_DATA_ALIGN(sizeof(struct sk_buff))` on x86_64.
const SKB_STRUCT: u32 = 256;
/// `SKB_DATA_ALIGN(sizeof(struct skb_shared_info))` on x86_64.
const SKB_SHINFO: u32 = 320;
/// `SMP_CACHE_BYTES`, `SKB_DATA_ALIGN`'s unit.
const SMP_CACHE_BYTES: u32 = 64;
/// `SKB_MAX_ORDER(0, 0)` = `SKB_WITH_OVERHEAD(PAGE_SIZE)`: the payload of a one-page
/// buffer, the most `tcp_collapse` puts in one.
pub(crate) const SKB_MAX_ORDER0: u32 = 4096 - SKB_SHINFO;

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

/// Truesize of `alloc_skb(len)` (`__alloc_skb`: head from `kmalloc`, `SKB_TRUESIZE`).
pub fn alloc_truesize(len: u32) -> u32 {
    kmalloc_size_roundup(skb_data_align(len) + SKB_SHINFO) + SKB_STRUCT
}

impl Tcb {
    /// Truesize of `len` received bytes that came in segments of `seg` bytes: one
    /// received buffer per segment ([`rx_truesize`]).
    pub(crate) fn rcv_truesize(len: u32, seg: u32) -> u32 {
        let seg = seg.clamp(1, len.max(1));
        let rest = len % seg;
        (len / seg) * rx_truesize(seg) + if rest > 0 { rx_truesize(rest) } else { 0 }
    }

    /// `sk_rmem_alloc`: the memory charged for the receive and out-of-order queues.
    pub(crate) fn rmem_alloc(&self) -> u64 {
        self.rcv_queue.truesize() + self.ofo.truesize()
    }

    /// `tcp_can_ingest` (Linux 6.16+): a segment of `len` bytes fits if the memory
    /// already charged plus its payload stays within `sk_rcvbuf` (its payload, not its
    /// truesize, so that a small buffer still takes a segment of large overhead).
    fn can_ingest(&self, len: u32) -> bool {
        self.rmem_alloc() + len as u64 <= self.rcvbuf as u64
    }

    /// `tcp_try_rmem_schedule` for a segment at `seq` of `len` bytes: room in the
    /// buffer and pages for its truesize (`sk_rmem_schedule`) at once, or after
    /// pruning (`tcp_prune_queue`, then `tcp_prune_ofo_queue` until the pages are
    /// there). False: drop it.
    pub(crate) fn try_rmem_schedule(&mut self, ctx: &mut Ctx, seq: u64, len: u32) -> bool {
        let size = Self::rcv_truesize(len, len.min(self.advmss)) as u64;
        if self.can_ingest(len) && self.mem_schedule(ctx, size, MemKind::Recv) {
            return true;
        }
        if !self.prune_queue(ctx, seq, len) {
            return false;
        }
        while !self.mem_schedule(ctx, size, MemKind::Recv) {
            if !self.prune_ofo_queue(ctx, seq, len) {
                return false;
            }
        }
        true
    }

    /// `tcp_prune_queue` (called when the segment does not fit): clamp the window,
    /// collapse both queues to cut their overhead, then drop out-of-order data from
    /// the top; true once the segment fits.
    fn prune_queue(&mut self, ctx: &mut Ctx, seq: u64, len: u32) -> bool {
        // "Do nothing if our queues are empty" (a buffer clamped to nothing would
        // refuse everything after).
        if self.rmem_alloc() == 0 {
            return false;
        }
        ctx.mib.inc(Mib::TcpExtPruneCalled);
        if !self.can_ingest(len) {
            self.clamp_window(ctx);
        } else if ctx.mem.under_pressure() {
            self.adjust_rcv_ssthresh();
        }
        if self.can_ingest(len) {
            return true;
        }
        let ratio = self.scaling_ratio;
        let bloated = move |truesize: u32, len: u32| {
            (truesize as i64 * ratio as i64) >> super::consts::TCP_RMEM_TO_WIN_SCALE > len as i64
        };
        let mut collapsed = self.ofo.collapse(self.rcvbuf, bloated, alloc_truesize);
        if !self.rcv_queue.is_empty() {
            collapsed += self.rcv_queue.collapse(bloated, alloc_truesize);
        }
        ctx.mib.add(Mib::TcpExtTCPRcvCollapsed, collapsed as u64);
        if self.can_ingest(len) {
            return true;
        }
        // "Collapsing did not help, destructive actions follow."
        self.prune_ofo_queue(ctx, seq, len);
        if self.can_ingest(len) {
            return true;
        }
        ctx.mib.inc(Mib::TcpExtRcvPruned);
        false
    }

    /// `tcp_clamp_window` (called when the segment does not fit): no quick ACKs; an
    /// unlocked buffer below `tcp_rmem[2]` becomes what is charged, unless the stack
    /// is under memory pressure or past `tcp_mem[0]`; if more is charged than the
    /// buffer, the window stops growing at two segments.
    fn clamp_window(&mut self, ctx: &Ctx) {
        self.quick = 0;
        let rmem2 = ctx.cfg.tcp_rmem[2];
        if self.rcvbuf < rmem2 && !self.rcvbuf_locked && ctx.mem.below_low(ctx.cfg) {
            self.rcvbuf = self.rmem_alloc().min(rmem2 as u64) as u32;
        }
        if self.rmem_alloc() > self.rcvbuf as u64 {
            self.rcv_ssthresh = self.window_clamp.min(2 * self.advmss);
        }
    }

    /// `tcp_prune_ofo_queue`: drop out-of-order segments from the highest down, an
    /// eighth of the buffer at a time until the segment at `seq` fits, never those
    /// below it ("if incoming skb would land last in ofo queue, stop pruning").
    /// Under memory pressure it goes on past that point. Pruning resets the SACK
    /// state (`tcp_sack_reset`); TcpExtOfoPruned counts every call that finds the
    /// queue not empty. True if anything was dropped.
    fn prune_ofo_queue(&mut self, ctx: &mut Ctx, seq: u64, len: u32) -> bool {
        if self.ofo.is_empty() {
            return false;
        }
        ctx.mib.inc(Mib::TcpExtOfoPruned);
        let mut goal = (self.rcvbuf >> 3) as i64;
        let mut pruned = false;
        while let Some(last) = self.ofo.last_seq() {
            if seq > last {
                break;
            }
            let (_, skb) = self.ofo.pop_last().expect("a last segment");
            pruned = true;
            goal -= skb.truesize as i64;
            if self.ofo.is_empty() || goal <= 0 {
                if self.can_ingest(len) && !ctx.mem.under_pressure() {
                    break;
                }
                goal = (self.rcvbuf >> 3) as i64;
            }
        }
        if pruned && self.sack_ok {
            self.ofo.reset_sacks();
            self.dsack = None;
        }
        pruned
    }
}
