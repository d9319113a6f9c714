//! Receive memory as Linux charges and bounds it (tcp_input.c `tcp_try_rmem_schedule`,
//! `tcp_can_ingest`, `tcp_prune_queue`, `tcp_clamp_window`, `tcp_collapse_ofo_queue`,
//! `tcp_collapse`, `tcp_prune_ofo_queue`).
//!
//! Every queued buffer, in order or out of order, is charged a truesize into
//! `sk_rmem_alloc` (`Tcb::rmem_alloc`), as tcp/skbuff.rs models it (include/linux/skbuff.h:
//! [`rx_truesize`] for a received segment, [`alloc_skb`] for a buffer that
//! `tcp_collapse` allocates, `skb_try_coalesce` for a segment that joins the buffer
//! before it).
//!
//! The window follows from the same charge: `scaling_ratio` is measured from
//! `Tcb::rcv_truesize` (tcp/rcvwin.rs, Linux 6.5+ `tcp_measure_rcv_mss`).
//! A segment must also find pages under the stack-wide `tcp_mem`
//! (`sk_rmem_schedule`, tcp/mem.rs); under memory pressure the window is held to
//! four segments (`tcp_adjust_rcv_ssthresh`).

use super::mem::MemKind;
use super::skbuff::{alloc_skb, rx_truesize, tun_skb, RxAlloc, RxHead, RxSkb};
use super::sock::Tcb;
use super::Ctx;
use crate::config::Config;
use crate::mib::Mib;

impl Tcb {
    /// The buffer of `len` received payload bytes that came in segments of `seg`
    /// bytes, in packets of `pkt` bytes (IP and TCP headers included), as the
    /// device allocates it (`cfg.rx_alloc`).
    pub(crate) fn rcv_skb(cfg: &Config, len: u32, seg: u32, pkt: u32) -> RxSkb {
        match cfg.rx_alloc {
            RxAlloc::PageFrag => RxSkb {
                truesize: Self::rcv_truesize(len, seg),
                head: RxHead::PageFrag { single: len <= seg },
            },
            RxAlloc::Tun => tun_skb(pkt),
        }
    }

    /// The buffer of the segment being processed, `len` bytes of payload.
    pub(crate) fn rx_skb(&self, cfg: &Config, len: u32) -> RxSkb {
        Self::rcv_skb(cfg, len, len.min(self.advmss), self.rx_pkt_len.max(len))
    }

    /// `skb_shinfo(skb)->gso_size ?: skb->len` for a received packet of `len`
    /// payload bytes, what `tcp_measure_rcv_mss` measures: a NIC's GRO packet is
    /// segments of `advmss` ([`RxAlloc::PageFrag`]); a TUN device without a
    /// virtio-net header hands over each packet as one skb without GSO
    /// ([`RxAlloc::Tun`], `tun_get_user`), measured whole.
    pub(crate) fn rx_gso_size(&self, cfg: &Config, len: u32) -> u32 {
        match cfg.rx_alloc {
            RxAlloc::PageFrag => len.min(self.advmss),
            RxAlloc::Tun => len,
        }
    }

    /// `max(1, skb_shinfo(skb)->gso_segs)` of a received packet of `len` payload
    /// bytes (`tcp_data_queue_ofo`'s `rcv_ooopack`): a GRO packet's segments of
    /// `rcv_mss` ([`RxAlloc::PageFrag`]), one for a TUN packet ([`RxAlloc::Tun`]).
    pub(crate) fn rx_gso_segs(&self, cfg: &Config, len: u32) -> u64 {
        match cfg.rx_alloc {
            RxAlloc::PageFrag => len.div_ceil(self.ack.rcv_mss.max(1)).max(1) as u64,
            RxAlloc::Tun => 1,
        }
    }

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

    /// `tcp_can_ingest`: room while the memory already charged is within
    /// `sk_rcvbuf`, whatever the arriving segment's size. Linux 6.16's stronger
    /// check (charged memory plus the segment's payload) was given up in 6.18.y and
    /// 6.19 ("tcp: give up on stronger sk_rcvbuf checks (for now)", 026dfef287c0)
    /// for the spurious drops it caused; this machine's 6.18 kernel runs the rule
    /// below (a socket's `rcvbuf` follows its `rmem_alloc` up through
    /// `tcp_clamp_window`, one segment past it each time: BENCHMARKS.md, "Under
    /// attack").
    fn can_ingest(&self) -> bool {
        self.rmem_alloc() <= self.rcvbuf as u64
    }

    /// `tcp_try_rmem_schedule` for a segment at `seq` whose skb's truesize is
    /// `size`: room in the buffer and pages for it (`sk_rmem_schedule`) at once, or after
    /// pruning (`tcp_prune_queue`, then `tcp_prune_ofo_queue` until the pages are
    /// there). False: drop it.
    pub(crate) fn try_rmem_schedule(&mut self, ctx: &mut Ctx, seq: u64, size: u32) -> bool {
        let size = size as u64;
        if self.can_ingest() && self.mem_schedule(ctx, size, MemKind::Recv) {
            return true;
        }
        if !self.prune_queue(ctx, seq) {
            return false;
        }
        while !self.mem_schedule(ctx, size, MemKind::Recv) {
            if !self.prune_ofo_queue(ctx, seq) {
                return false;
            }
        }
        true
    }

    /// `tcp_prune_queue` (called when the segment does not fit): clamp the window,
    /// collapse both queues to cut their overhead, then drop out-of-order data from
    /// the top; true once the segment fits. When nothing helped, header prediction
    /// is turned off.
    fn prune_queue(&mut self, ctx: &mut Ctx, seq: u64) -> bool {
        // "Do nothing if our queues are empty" (a buffer clamped to nothing would
        // refuse everything after).
        if self.rmem_alloc() == 0 {
            return false;
        }
        ctx.mib.inc(Mib::TcpExtPruneCalled);
        if !self.can_ingest() {
            self.clamp_window(ctx);
        } else if ctx.mem.under_pressure() {
            self.adjust_rcv_ssthresh();
        }
        if self.can_ingest() {
            return true;
        }
        let ratio = self.scaling_ratio;
        let bloated = move |truesize: u32, len: u32| {
            (truesize as i64 * ratio as i64) >> super::consts::TCP_RMEM_TO_WIN_SCALE > len as i64
        };
        let mut collapsed = self.ofo.collapse(self.rcvbuf, bloated, alloc_skb);
        if !self.rcv_queue.is_empty() {
            collapsed += self.rcv_queue.collapse(bloated, alloc_skb);
        }
        ctx.mib.add(Mib::TcpExtTCPRcvCollapsed, collapsed as u64);
        // "sk_mem_reclaim(sk)" after collapsing (and in each freed skb's
        // sk_mem_uncharge): before the segment's own sk_rmem_schedule.
        self.mem_reclaim_now(ctx);
        if self.can_ingest() {
            return true;
        }
        // "Collapsing did not help, destructive actions follow."
        self.prune_ofo_queue(ctx, seq);
        if self.can_ingest() {
            return true;
        }
        ctx.mib.inc(Mib::TcpExtRcvPruned);
        // "Massive buffer overcommit": header prediction is off until
        // tcp_fast_path_check finds room again, so an in-order segment takes the
        // slow path and its memory check.
        self.fast_path_off();
        false
    }

    /// `tcp_clamp_window` (called when the segment does not fit): no quick ACKs; an
    /// unlocked buffer below `tcp_rmem[2]` becomes what is charged, unless the stack
    /// is under memory pressure or past `tcp_mem[0]`; if more is charged than the
    /// buffer, the window stops growing at two segments.
    fn clamp_window(&mut self, ctx: &Ctx) {
        self.ack.quick = 0;
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
    /// state (`tcp_sack_reset`); TcpExtOfoPruned counts the calls that dropped
    /// something (since Linux 6.2, which stopped pruning below the arriving
    /// segment). True if anything was dropped.
    fn prune_ofo_queue(&mut self, ctx: &mut Ctx, seq: u64) -> bool {
        if self.ofo.is_empty() {
            return false;
        }
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
                if self.can_ingest() && !ctx.mem.under_pressure() {
                    break;
                }
                goal = (self.rcvbuf >> 3) as i64;
            }
        }
        self.ofo_drops(); // each pruned skb's tcp_drop_reason
        self.mem_reclaim_now(ctx); // their sk_mem_uncharge
        if pruned {
            ctx.mib.inc(Mib::TcpExtOfoPruned);
            if self.rx_opt.sack_ok {
                self.ofo.reset_sacks();
                self.dsack = None;
            }
        }
        pruned
    }
}
