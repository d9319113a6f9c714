//! Stack-wide TCP memory under `net.ipv4.tcp_mem` (net/core/sock.c
//! `__sk_mem_schedule`, `__sk_mem_raise_allocated`, `__sk_mem_reduce_allocated`;
//! include/net/sock.h `sk_rmem_schedule`, `sk_wmem_schedule`,
//! `sk_forced_mem_schedule`, `sk_mem_reclaim`; tcp.c `tcp_enter_memory_pressure`,
//! `tcp_leave_memory_pressure`; include/net/tcp.h `tcp_out_of_memory`).
//!
//! Each socket reserves whole 4 KB pages for what it has charged (`sk_rmem_alloc`
//! plus `sk_wmem_queued`); the reserve beyond the charge is its `sk_forward_alloc`.
//! The stack's total (`tcp_memory_allocated`, `/proc/net/sockstat` "mem") is the
//! sum of the reserves. A charge that needs more pages asks `tcp_mem`: below its
//! first value always granted; above its second the stack is under memory pressure
//! (TcpExtTCPMemoryPressures); above its third refused, and in between refused
//! under pressure to a socket holding more than its share of the hard limit, unless
//! the socket's queue is below `tcp_rmem[0]`/`tcp_wmem[0]` (RFC 7323 needs that
//! much). Pages return as soon as the charge drops (`sk_mem_uncharge` reclaims
//! since Linux 6.0), which here is done once the event that freed them ends.
//! Under pressure, receive windows stop growing and shrink to four segments, send
//! buffers stop growing, and orphans are reset over the hard limit.
//!
//! Not modelled: the per-CPU reserve that batches updates of the total
//! (`net.core.mem_pcpu_rsv`), memory cgroups and `SO_RESERVE_MEM`.

use super::consts::SOCK_MIN_SNDBUF;
use super::sock::Tcb;
use super::Ctx;
use crate::config::Config;
use crate::mib::{Counters, Mib};
use crate::time::Instant;

/// `PAGE_SIZE`: the unit of `tcp_mem` and of a socket's reserve.
pub const PAGE_SIZE: u64 = 4096;

/// The stack-wide account: Linux's `tcp_memory_allocated`,
/// `tcp_memory_pressure` and `tcp_sockets_allocated`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpMem {
    /// Pages reserved by all TCP sockets (`tcp_memory_allocated`).
    pub allocated: u64,
    /// Since when the stack is under memory pressure (`tcp_memory_pressure`).
    pub pressure_since: Option<Instant>,
    /// TCP sockets, listeners included (`tcp_sockets_allocated`).
    pub sockets: u32,
}

/// What a charge is for (`SK_MEM_SEND`, `SK_MEM_RECV`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MemKind {
    /// The write queue (`sk_wmem_schedule`).
    Send,
    /// The receive and out-of-order queues (`sk_rmem_schedule`).
    Recv,
}

/// `sk_mem_pages`: whole pages for `bytes`.
fn mem_pages(bytes: u64) -> u64 {
    bytes.div_ceil(PAGE_SIZE)
}

impl TcpMem {
    /// `tcp_under_memory_pressure`.
    pub fn under_pressure(&self) -> bool {
        self.pressure_since.is_some()
    }

    /// `tcp_enter_memory_pressure`: notes when it began, counted once.
    fn enter_pressure(&mut self, now: Instant, mib: &mut Counters) {
        if self.pressure_since.is_none() {
            self.pressure_since = Some(now);
            mib.inc(Mib::TcpExtTCPMemoryPressures);
        }
    }

    /// `tcp_leave_memory_pressure`: adds the time spent under it, in ms.
    fn leave_pressure(&mut self, now: Instant, mib: &mut Counters) {
        if let Some(since) = self.pressure_since.take() {
            let ms = now.saturating_since(since).as_millis() as u64;
            mib.add(Mib::TcpExtTCPMemoryPressuresChrono, ms);
        }
    }

    /// Buffers may grow: not under memory pressure and below `tcp_mem[0]` (the test
    /// `tcp_should_expand_sndbuf` and `tcp_clamp_window` share).
    pub(crate) fn below_low(&self, cfg: &Config) -> bool {
        !self.under_pressure() && self.allocated < cfg.tcp_mem[0]
    }

    /// `__sk_mem_reduce_allocated`: `pages` go back; pressure ends below
    /// `tcp_mem[0]`.
    pub(crate) fn reduce(&mut self, cfg: &Config, pages: u64, now: Instant, mib: &mut Counters) {
        self.allocated = self.allocated.saturating_sub(pages);
        if self.under_pressure() && self.allocated < cfg.tcp_mem[0] {
            self.leave_pressure(now, mib);
        }
    }
}

impl Tcb {
    /// What the socket has charged: `sk_rmem_alloc` plus `sk_wmem_queued`, less
    /// the pinned pages of pure zerocopy skbs, which `__zerocopy_sg_from_iter`
    /// adds to `sk_wmem_queued` without `sk_mem_charge` (`skb_zcopy_pure`).
    pub(crate) fn mem_charged(&self) -> u64 {
        (self.rmem_alloc() + self.wmem_queued)
            .saturating_sub(self.wq_uncharged + self.rtx.uncharged)
    }

    /// `sk_forward_alloc`: reserved but not charged (negative right after a charge
    /// made without asking, until [`Tcb::mem_force`]).
    pub(crate) fn forward_alloc(&self) -> i64 {
        (self.mem_pages * PAGE_SIZE) as i64 - self.mem_charged() as i64
    }

    /// `sk_forced_mem_schedule`: pages for `size` more bytes, taken whatever
    /// `tcp_mem` says.
    pub(crate) fn mem_forced_schedule(&mut self, mem: &mut TcpMem, size: u64) {
        let delta = size as i64 - self.forward_alloc();
        if delta > 0 {
            let amt = mem_pages(delta as u64);
            mem.allocated += amt;
            self.mem_pages += amt;
        }
    }

    /// Pages for what was charged without asking (the first skb of an empty write
    /// or receive queue, a split for a retransmission, a FIN), as
    /// `sk_forced_mem_schedule` gave them.
    pub(crate) fn mem_force(&mut self, mem: &mut TcpMem) {
        self.mem_forced_schedule(mem, 0);
    }

    /// After an event on the socket: pages for what it charged without asking
    /// ([`Tcb::mem_force`]), then, if it freed an skb, the reserve it no longer
    /// needs back ([`Tcb::mem_reclaim`]): Linux reclaims in `sk_mem_uncharge`
    /// (since 5.19's "net: keep sk->sk_forward_alloc as small as possible") and
    /// after `tcp_prune_queue`'s collapse, not otherwise, so pages scheduled for a
    /// segment that then joined a tail skb's room stay in the reserve.
    pub(crate) fn mem_sync(
        &mut self,
        cfg: &Config,
        mem: &mut TcpMem,
        now: Instant,
        mib: &mut Counters,
    ) {
        self.mem_force(mem);
        if self.uncharged_total() != self.uncharged_seen {
            self.uncharged_seen = self.uncharged_total();
            self.mem_reclaim(cfg, mem, now, mib, false);
        }
    }

    /// `sk_mem_reclaim` where Linux calls it in the middle of an event (after
    /// `tcp_prune_queue` freed skbs): what was freed so far is reclaimed now, not
    /// again at the event's end ([`Tcb::mem_sync`]).
    pub(crate) fn mem_reclaim_now(&mut self, ctx: &mut Ctx) {
        self.uncharged_seen = self.uncharged_total();
        self.mem_reclaim(ctx.cfg, ctx.mem, ctx.now, ctx.mib, false);
    }

    /// Truesize ever uncharged: write and retransmit queues ([`Tcb::wmem_free`]),
    /// the receive and out-of-order queues' frees.
    fn uncharged_total(&self) -> u64 {
        self.uncharged + self.rcv_queue.freed() + self.ofo.freed()
    }

    /// `sk_wmem_queued_add(sk, -n)` and `sk_mem_uncharge(sk, n)`: a write or
    /// retransmit queue skb (or part of one) freed.
    pub(crate) fn wmem_free(&mut self, n: u64) {
        self.wmem_queued = self.wmem_queued.saturating_sub(n);
        self.uncharged += n;
    }

    /// `sk_rmem_schedule` / `sk_wmem_schedule`: room to charge `size` more bytes,
    /// from the reserve or from new pages `tcp_mem` grants (`__sk_mem_schedule`).
    pub(crate) fn mem_schedule(&mut self, ctx: &mut Ctx, size: u64, kind: MemKind) -> bool {
        self.mem_force(ctx.mem);
        let delta = size as i64 - self.forward_alloc();
        if delta <= 0 {
            return true;
        }
        let amt = mem_pages(delta as u64);
        self.mem_pages += amt;
        if self.raise_allocated(ctx, size, amt, kind) {
            return true;
        }
        self.mem_pages -= amt;
        false
    }

    /// `__sk_mem_raise_allocated`, with `amt` pages already in the reserve.
    fn raise_allocated(&mut self, ctx: &mut Ctx, size: u64, amt: u64, kind: MemKind) -> bool {
        let limits = ctx.cfg.tcp_mem;
        ctx.mem.allocated += amt;
        let allocated = ctx.mem.allocated;
        if allocated <= limits[0] {
            ctx.mem.leave_pressure(ctx.now, ctx.mib);
            return true;
        }
        if allocated > limits[1] {
            ctx.mem.enter_pressure(ctx.now, ctx.mib);
        }
        if allocated <= limits[2] && self.mem_fair_share(ctx, kind) {
            return true;
        }
        // suppress_allocation: a writer over its (now smaller) send buffer may
        // not block, so it is given the memory.
        if kind == MemKind::Send {
            self.moderate_sndbuf();
            if self.wmem_queued + size >= self.sndbuf as u64 {
                return true;
            }
        }
        ctx.mem.allocated -= amt;
        false
    }

    /// Between `tcp_mem[0]` and the hard limit: queues under `tcp_rmem[0]` /
    /// `tcp_wmem[0]` always grow (RFC 7323's windows need that much); under
    /// pressure, only sockets holding less than an even share of `tcp_mem[2]`.
    fn mem_fair_share(&self, ctx: &Ctx, kind: MemKind) -> bool {
        let below_min = match kind {
            MemKind::Recv => self.rmem_alloc() < ctx.cfg.tcp_rmem[0] as u64,
            MemKind::Send => self.wmem_queued < ctx.cfg.tcp_wmem[0] as u64,
        };
        if below_min || !ctx.mem.under_pressure() {
            return true;
        }
        let sockets = ctx.mem.sockets.max(1) as u64;
        ctx.cfg.tcp_mem[2] > sockets * self.mem_pages
    }

    /// `sk_stream_moderate_sndbuf`: an unlocked send buffer shrinks to half of what
    /// is queued, at least `SOCK_MIN_SNDBUF`.
    pub(crate) fn moderate_sndbuf(&mut self) {
        if self.sndbuf_locked {
            return;
        }
        let val = (self.sndbuf as u64).min(self.wmem_queued >> 1) as u32;
        self.sndbuf = val.max(SOCK_MIN_SNDBUF);
    }

    /// `sk_mem_reclaim` after the charge dropped: whole pages of the reserve not
    /// charged go back to the stack. With `all`, the socket is gone and returns
    /// every page (`sk_mem_reclaim_final`).
    pub(crate) fn mem_reclaim(
        &mut self,
        cfg: &Config,
        mem: &mut TcpMem,
        now: Instant,
        mib: &mut Counters,
        all: bool,
    ) {
        let keep = if all {
            0
        } else {
            mem_pages(self.mem_charged())
        };
        if self.mem_pages > keep {
            mem.reduce(cfg, self.mem_pages - keep, now, mib);
            self.mem_pages = keep;
        }
    }

    /// `tcp_out_of_memory`: the stack is over `tcp_mem[2]` and this socket holds
    /// more than `SOCK_MIN_SNDBUF` of unsent or unacknowledged data.
    pub(crate) fn out_of_memory(&self, ctx: &Ctx) -> bool {
        self.wmem_queued > SOCK_MIN_SNDBUF as u64 && ctx.mem.allocated > ctx.cfg.tcp_mem[2]
    }

    /// `tcp_adjust_rcv_ssthresh`: under memory pressure the window is held to four
    /// segments.
    pub(crate) fn adjust_rcv_ssthresh(&mut self) {
        self.rcv_ssthresh = self.rcv_ssthresh.min(4 * self.advmss);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::TestStack;

    const T0: Instant = Instant(1_000_000_000);

    fn cfg(tcp_mem: [u64; 3]) -> Config {
        Config {
            tcp_mem,
            ..Config::default()
        }
    }

    /// A socket with `queued` bytes on its write queue, all in its reserve.
    fn sender(cfg: &Config, queued: u64) -> Tcb {
        let mut t = Tcb::for_test(cfg);
        t.wmem_queued = queued;
        t.mem_pages = mem_pages(queued);
        t.sndbuf = 1 << 20;
        t
    }

    #[test]
    fn below_the_first_limit_charges_take_whole_pages_then_the_reserve() {
        let cfg = cfg([10, 20, 30]);
        let mut st = TestStack::default();
        let mut t = Tcb::for_test(&cfg);
        let mut ctx = st.ctx(&cfg, T0, true);
        assert!(t.mem_schedule(&mut ctx, 5000, MemKind::Recv));
        assert_eq!((t.mem_pages, ctx.mem.allocated), (2, 2));
        assert!(
            t.mem_schedule(&mut ctx, 3000, MemKind::Recv),
            "from the reserve"
        );
        assert_eq!(ctx.mem.allocated, 2);
        assert!(!ctx.mem.under_pressure());
    }

    #[test]
    fn over_the_second_limit_pressure_begins_once_and_ends_below_the_first() {
        let cfg = cfg([10, 20, 30]);
        let mut st = TestStack::default();
        st.mem.allocated = 20;
        st.mem.sockets = 1;
        let mut t = sender(&cfg, 8192);
        let mut ctx = st.ctx(&cfg, T0, true);
        assert!(t.mem_schedule(&mut ctx, 100, MemKind::Send), "its share");
        assert!(ctx.mem.under_pressure());
        assert!(t.mem_schedule(&mut ctx, 5000, MemKind::Send));
        assert_eq!(
            ctx.mib.get(Mib::TcpExtTCPMemoryPressures),
            1,
            "counted once"
        );
        // Pages back below tcp_mem[0] end it, and count its duration.
        let later = Instant(T0.0 + 7_000_000);
        ctx.mem.reduce(&cfg, 15, later, ctx.mib);
        assert!(!ctx.mem.under_pressure());
        assert_eq!(ctx.mib.get(Mib::TcpExtTCPMemoryPressuresChrono), 7);
    }

    #[test]
    fn under_pressure_only_sockets_below_an_even_share_of_the_hard_limit_grow() {
        let mut cfg = cfg([10, 20, 30]);
        cfg.tcp_rmem[0] = 0; // no minimum buffer: the share decides
        let mut st = TestStack::default();
        st.mem.allocated = 22;
        st.mem.pressure_since = Some(T0);
        let mut t = Tcb::for_test(&cfg);
        t.mem_pages = 3;
        st.mem.sockets = 7; // 30 > 7 * 4
        let mut ctx = st.ctx(&cfg, T0, true);
        assert!(t.mem_schedule(&mut ctx, 12_289, MemKind::Recv));
        assert_eq!((t.mem_pages, ctx.mem.allocated), (4, 23));
        ctx.mem.sockets = 6; // 30 > 6 * 5 does not hold
        assert!(!t.mem_schedule(&mut ctx, 16_385, MemKind::Recv));
        assert_eq!((t.mem_pages, ctx.mem.allocated), (4, 23), "given back");
    }

    #[test]
    fn a_queue_below_its_minimum_grows_under_pressure_but_not_over_the_hard_limit() {
        let cfg = cfg([10, 20, 30]);
        let mut st = TestStack::default();
        st.mem.allocated = 25;
        st.mem.pressure_since = Some(T0);
        st.mem.sockets = 1000;
        let mut t = Tcb::for_test(&cfg);
        let mut ctx = st.ctx(&cfg, T0, true);
        assert!(
            t.mem_schedule(&mut ctx, 2000, MemKind::Recv),
            "below tcp_rmem[0]"
        );
        ctx.mem.allocated = 30;
        assert!(
            !t.mem_schedule(&mut ctx, 6000, MemKind::Recv),
            "over tcp_mem[2]"
        );
        assert_eq!(ctx.mem.allocated, 30);
    }

    #[test]
    fn a_refused_writer_gets_a_smaller_buffer_and_is_granted_if_over_it() {
        let cfg = cfg([1, 1, 1]);
        let mut st = TestStack::default();
        st.mem.allocated = 5;
        let mut ctx = st.ctx(&cfg, T0, true);
        // The buffer shrinks to half the queue; the writer, now over it, is granted
        // (it could not block otherwise; sk_stream_memory_free stops it next).
        let mut t = sender(&cfg, 20_000);
        assert!(t.mem_schedule(&mut ctx, 1000, MemKind::Send));
        assert_eq!(t.sndbuf, 10_000);
        // A small queue: the buffer stops at SOCK_MIN_SNDBUF, the writer under it
        // is refused.
        let mut t = sender(&cfg, 0);
        assert!(!t.mem_schedule(&mut ctx, 3000, MemKind::Send));
        assert_eq!(t.sndbuf, SOCK_MIN_SNDBUF);
        // A locked buffer stays, and a writer under it is refused.
        let mut t = sender(&cfg, 20_000);
        t.sndbuf_locked = true;
        assert!(!t.mem_schedule(&mut ctx, 1000, MemKind::Send));
        assert_eq!(t.sndbuf, 1 << 20);
        assert_eq!(ctx.mem.allocated, 6, "only the granted page stays");
    }

    #[test]
    fn forced_charges_and_reclaim_keep_the_reserve_at_whole_pages() {
        let cfg = cfg([10, 20, 30]);
        let mut st = TestStack::default();
        let mut t = Tcb::for_test(&cfg);
        t.wmem_queued = 9000; // charged without asking
        let ctx = st.ctx(&cfg, T0, true);
        t.mem_force(ctx.mem);
        assert_eq!((t.mem_pages, ctx.mem.allocated), (3, 3));
        t.wmem_queued = 4096;
        t.mem_reclaim(&cfg, ctx.mem, T0, ctx.mib, false);
        assert_eq!((t.mem_pages, ctx.mem.allocated), (1, 1));
        t.mem_reclaim(&cfg, ctx.mem, T0, ctx.mib, true);
        assert_eq!((t.mem_pages, ctx.mem.allocated), (0, 0));
    }

    /// `sk_mem_uncharge` reclaims; an event that freed nothing keeps the pages
    /// it scheduled, even if what they were for was charged less (a segment
    /// that joined a tail skb's room).
    #[test]
    fn only_an_uncharge_gives_the_reserve_back() {
        let cfg = cfg([10, 20, 30]);
        let mut st = TestStack::default();
        let mut t = Tcb::for_test(&cfg);
        let mut ctx = st.ctx(&cfg, T0, true);
        assert!(t.mem_schedule(&mut ctx, 2304, MemKind::Recv));
        assert_eq!(t.forward_alloc(), 4096, "scheduled, then charged nothing");
        t.mem_sync(&cfg, ctx.mem, T0, ctx.mib);
        assert_eq!((t.mem_pages, t.forward_alloc()), (1, 4096), "kept");
        t.wmem_queued = 1000;
        t.wmem_free(1000);
        t.mem_sync(&cfg, ctx.mem, T0, ctx.mib);
        assert_eq!((t.mem_pages, ctx.mem.allocated), (0, 0), "reclaimed");
    }

    #[test]
    fn out_of_memory_needs_the_hard_limit_passed_and_data_held() {
        let cfg = cfg([1, 1, 4]);
        let mut st = TestStack::default();
        st.mem.allocated = 5;
        let t = sender(&cfg, SOCK_MIN_SNDBUF as u64 + 1);
        assert!(t.out_of_memory(&st.ctx(&cfg, T0, true)));
        let t = sender(&cfg, SOCK_MIN_SNDBUF as u64);
        assert!(!t.out_of_memory(&st.ctx(&cfg, T0, true)));
        st.mem.allocated = 4;
        let t = sender(&cfg, 100_000);
        assert!(!t.out_of_memory(&st.ctx(&cfg, T0, true)));
    }
}
