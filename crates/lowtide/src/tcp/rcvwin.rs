//! The receive window as Linux 6.18 offers it (include/net/tcp.h `tcp_win_from_space`,
//! tcp_input.c `tcp_measure_rcv_mss`, `tcp_grow_window`, `tcp_init_buffer_space`,
//! tcp.c `tcp_set_window_clamp`, tcp_output.c `tcp_select_initial_window`,
//! `__tcp_select_window`, `tcp_select_window`).
//!
//! The buffer (`sk_rcvbuf`) bounds memory, the window offers payload: since Linux 6.5
//! (dfa2f0483360 'tcp: get rid of sysctl_tcp_adv_win_scale') the two are converted by
//! `scaling_ratio`, the payload per byte of truesize (in 1/256ths) of the segments
//! received, 50 % until the first full-sized one is measured.
//!
//! Truesize in lowtide: each queued buffer is charged as tcp/rmem.rs models Linux's
//! skbs ([`Tcb::rmem_alloc`], [`Tcb::rcv_truesize`]): 1448 bytes cost 2304 (ratio
//! 160), as this machine's 6.18 kernel charges the same segment received over veth.
//!
//! Within the window the full buffer allows (`window_clamp`), the offered window
//! grows by two segments per segment received (`rcv_ssthresh`, "slow start" of the
//! window), so that memory is committed only as the sender proves it needs it.

use super::consts::{
    SOCK_MIN_RCVBUF, TCPOLEN_TSTAMP_ALIGNED, TCP_INIT_CWND, TCP_MAX_WSCALE, TCP_MIN_MSS,
    TCP_MIN_RCVMSS, TCP_RMEM_TO_WIN_SCALE,
};
use super::delack::ICSK_ACK_PUSHED;

use super::mem::TcpMem;
use super::sock::Tcb;
use super::Ctx;
use crate::config::Config;
use crate::socket::SocketError;
use lowtide_wire::tcp::{TcpFlags, TcpRepr};

/// `tcp_set_window_clamp`'s clamp for a non-zero `TCP_WINDOW_CLAMP` value: at least
/// `SOCK_MIN_RCVBUF / 2`, compared as an int (a negative value is the floor).
pub(crate) fn window_clamp_from_user(val: i32) -> u32 {
    val.max((SOCK_MIN_RCVBUF / 2) as i32) as u32
}

impl Tcb {
    /// `tcp_win_from_space`: the payload `space` bytes of memory hold.
    pub(crate) fn win_from_space(&self, space: i64) -> i64 {
        (space * self.scaling_ratio as i64) >> TCP_RMEM_TO_WIN_SCALE
    }

    /// `tcp_space_from_win`: the memory `win` bytes of payload need.
    pub(crate) fn space_from_win(&self, win: u64) -> u64 {
        (win << TCP_RMEM_TO_WIN_SCALE) / self.scaling_ratio.max(1) as u64
    }

    /// `tcp_space`: the window the free part of the buffer allows (may be negative).
    pub(crate) fn tcp_space(&self) -> i64 {
        self.win_from_space(self.rcvbuf as i64 - self.rmem_alloc() as i64)
    }

    /// `tcp_full_space`: the window the whole buffer allows.
    pub(crate) fn full_space(&self) -> u32 {
        self.win_from_space(self.rcvbuf as i64) as u32
    }

    /// `tcp_select_initial_window` with its callers' clamp for a locked buffer
    /// (`tcp_connect_init`, `tcp_openreq_init_rwin`): the window of our SYN or
    /// SYN-ACK, a multiple of `mss`, our window scale, and `rcv_ssthresh` from it.
    /// `init_rwnd` is the route's `initrwnd` in segments (0: none).
    pub(crate) fn select_initial_window(
        &mut self,
        cfg: &Config,
        mss: u32,
        wscale_ok: bool,
        init_rwnd: u32,
    ) {
        let full = self.full_space();
        if self.rcvbuf_locked && (self.window_clamp > full || self.window_clamp == 0) {
            self.window_clamp = full;
        }
        if self.window_clamp == 0 {
            self.window_clamp = 65535 << TCP_MAX_WSCALE;
        }
        let mut space = full.min(self.window_clamp);
        if space > mss {
            space -= space % mss;
        }
        // "offering an initial window larger than 32767 will break some buggy TCP
        // stacks" (tcp_workaround_signed_windows).
        self.rcv_wnd = if cfg.tcp_workaround_signed_windows {
            space.min(super::consts::MAX_TCP_WINDOW)
        } else {
            space
        };
        if init_rwnd != 0 {
            self.rcv_wnd = self.rcv_wnd.min(init_rwnd.saturating_mul(mss));
        }
        self.rx_opt.rcv_wscale = 0;
        if wscale_ok {
            // "Set window scaling on max possible window": net.core.rmem_max too.
            let max = space.max(cfg.tcp_rmem[2]).max(cfg.rmem_max);
            let max = max.min(self.window_clamp).max(1);
            self.rx_opt.rcv_wscale = (max.ilog2() as i32 - 15).clamp(0, TCP_MAX_WSCALE) as u8;
        }
        self.window_clamp = self.window_clamp.min(65535 << self.rx_opt.rcv_wscale);
        self.rcv_ssthresh = self.rcv_wnd;
    }

    /// The MSS our SYN-ACK's window is a multiple of (`tcp_openreq_init_rwin`: the
    /// timestamp option's room is taken off) or our SYN's (`tcp_connect_init`: no
    /// timestamp seen yet). A SYN cookie's child redoes the window with the
    /// cookie's MSS whole (`cookie_v4_check` / `cookie_v6_check`: `req->mss`).
    pub(crate) fn initial_window_mss(&self) -> u32 {
        if self.req.cookie_mss != 0 {
            return self.req.cookie_mss;
        }
        let passive = self.state != super::TcpState::SynSent && self.rx_opt.tstamp_ok;
        self.advmss - if passive { TCPOLEN_TSTAMP_ALIGNED } else { 0 }
    }

    /// `tcp_init_buffer_space` (receive half) at establishment, with
    /// `tcp_initialize_rcv_mss` and the timestamp's room taken off `advmss`
    /// (`tcp_rcv_synsent_state_process`; this kernel's children show it too):
    /// `window_clamp` keeps `maxwin >> tcp_app_win` for the application and at
    /// least one segment of the full space (neither with `tcp_app_win` 0), `rcvq_space`
    /// starts at ten segments or the initial window.
    /// A Fast Open child does this at its SYN, with the whole `advmss`; the
    /// timestamp's room comes off when its handshake completes
    /// ([`Tcb::establish_rcv_mss`]).
    pub(crate) fn init_rcv_buffer_space(&mut self, cfg: &Config) {
        if self.tfo.rsk.is_none() {
            self.establish_rcv_mss();
        }
        self.rcvq_space_seq = self.copied_seq;
        let maxwin = self.full_space();
        if self.window_clamp >= maxwin {
            self.window_clamp = maxwin;
            if cfg.tcp_app_win != 0 && maxwin > 4 * self.advmss {
                let app = maxwin - (maxwin >> cfg.tcp_app_win);
                self.window_clamp = app.max(4 * self.advmss);
            }
        }
        // "Force reservation of one segment.", also only with tcp_app_win.
        if cfg.tcp_app_win != 0
            && self.window_clamp > 2 * self.advmss
            && self.window_clamp + self.advmss > maxwin
        {
            self.window_clamp = (2 * self.advmss).max(maxwin.saturating_sub(self.advmss));
        }
        self.rcv_ssthresh = self.rcv_ssthresh.min(self.window_clamp);
        self.rcvq_space = self
            .rcv_ssthresh
            .min(self.rcv_wnd)
            .min(TCP_INIT_CWND * self.advmss);
    }

    /// `tcp_rcv_state_process` entering ESTABLISHED: the timestamp's room comes off
    /// `advmss`, then `tcp_initialize_rcv_mss`.
    pub(crate) fn establish_rcv_mss(&mut self) {
        if self.rx_opt.tstamp_ok {
            self.advmss -= TCPOLEN_TSTAMP_ALIGNED;
        }
        self.initialize_rcv_mss();
    }

    /// `tcp_initialize_rcv_mss`: the receive MSS guessed before any segment is
    /// measured: `advmss`, `mss_cache` and half the receive window bound it, then
    /// `TCP_MSS_DEFAULT` from above and `TCP_MIN_MSS` (88) from below.
    pub(crate) fn initialize_rcv_mss(&mut self) {
        let hint = self.advmss.min(self.mss_cache).min(self.rcv_wnd / 2);
        self.ack.rcv_mss = hint.clamp(TCP_MIN_MSS, TCP_MIN_RCVMSS);
    }

    /// `TCP_WINDOW_CLAMP` (`tcp_set_window_clamp`, Linux 6.18): 0 clears the clamp,
    /// only on a closed socket (else `EINVAL`); any other value, negative ones
    /// included (`max_t(int, ...)`), is raised to `SOCK_MIN_RCVBUF / 2`
    /// ([`Tcb::set_window_clamp`]).
    pub(crate) fn set_window_clamp_user(&mut self, val: i32) -> Result<(), SocketError> {
        if val == 0 {
            if self.state != super::TcpState::Closed {
                return Err(SocketError::InvalidInput);
            }
            self.window_clamp = 0;
            return Ok(());
        }
        self.set_window_clamp(window_clamp_from_user(val));
        Ok(())
    }

    /// `tcp_set_window_clamp`: a smaller clamp lowers `rcv_ssthresh`
    /// (`__tcp_adjust_rcv_ssthresh`; lowtide has no `SO_RESERVE_MEM` to keep it up),
    /// a larger one lets it reach the current window.
    pub(crate) fn set_window_clamp(&mut self, val: u32) {
        let new = val.max(SOCK_MIN_RCVBUF / 2);
        let old = self.window_clamp;
        if new == old {
            return;
        }
        self.window_clamp = new;
        self.rcv_ssthresh = if new < old {
            self.rcv_ssthresh.min(new)
        } else {
            self.rcv_ssthresh.max(self.rcv_wnd.min(new))
        };
    }

    /// `tcp_measure_rcv_mss` for `len` bytes under `th` that came in segments of
    /// `seg` (a GRO packet's `gso_size`): a new segment size updates `rcv_mss` and
    /// measures `scaling_ratio`, which moves `window_clamp` and bounds `rcvq_space`;
    /// a pushed full segment, or a small one, marks the ACK `ICSK_ACK_PUSHED`
    /// (`tcp/delack.rs`).
    pub(crate) fn measure_rcv_mss(&mut self, th: &TcpRepr, len: u32, seg: u32, truesize: u32) {
        let lss = self.ack.last_seg_size;
        self.ack.last_seg_size = 0;
        if seg < self.ack.rcv_mss {
            return self.measure_small_segment(th, seg, lss);
        }
        if seg != self.ack.rcv_mss {
            let old = self.scaling_ratio;
            let val = ((len as u64) << TCP_RMEM_TO_WIN_SCALE) / truesize.max(1) as u64;
            self.scaling_ratio = val.clamp(1, 255) as u8;
            if old != self.scaling_ratio {
                self.set_window_clamp(self.full_space());
                self.rcvq_space = self.rcvq_space.min(self.window_clamp);
            }
        }
        self.ack.rcv_mss = seg.min(self.advmss);
        if th.flags.contains(TcpFlags::PSH) {
            self.ack.pushed |= ICSK_ACK_PUSHED;
        }
    }

    /// `tcp_grow_window`, for `len` in-order bytes just queued (segments of `seg`):
    /// while the window is below what the clamp and the free buffer allow, each
    /// segment whose overhead the buffer can carry raises `rcv_ssthresh` by two
    /// segments, and the next ACK goes at once; under memory pressure the window is
    /// held instead (`tcp_adjust_rcv_ssthresh`). `truesize`: the segment's buffer;
    /// `uncharged`: the part of what is charged that Linux charges only after
    /// (`tcp_data_queue_ofo` grows the window before `skb_set_owner_r`).
    pub(crate) fn grow_window(&mut self, ctx: &Ctx, len: u32, truesize: u32, uncharged: u32) {
        let space = self.rcvbuf as i64 - (self.rmem_alloc() as i64 - uncharged as i64);
        let room =
            (self.window_clamp as i64).min(self.win_from_space(space)) - self.rcv_ssthresh as i64;
        if room <= 0 {
            return;
        }
        // "Check #1"
        if ctx.mem.under_pressure() {
            return self.adjust_rcv_ssthresh();
        }
        let cfg = ctx.cfg;
        // "Check #2. Increase window, if skb with such overhead will fit to rcvbuf
        // in future."
        let incr = if self.win_from_space(truesize as i64) <= len as i64 {
            2 * self.advmss
        } else {
            self.grow_window_slow(cfg, len, truesize)
        };
        if incr > 0 {
            let incr = incr.max(2 * len) as i64;
            self.rcv_ssthresh += room.min(incr) as u32;
            self.ack.quick |= 1;
        }
    }

    /// `__tcp_grow_window`: a segment with more overhead than its ratio may still
    /// grow a small window: the smaller `rcv_ssthresh` is compared with `tcp_rmem[2]`,
    /// the more overhead is tolerated.
    fn grow_window_slow(&self, cfg: &Config, len: u32, truesize: u32) -> u32 {
        let mut truesize = self.win_from_space(truesize as i64) >> 1;
        let mut window = self.win_from_space(cfg.tcp_rmem[2] as i64) >> 1;
        while self.rcv_ssthresh as i64 <= window {
            if truesize <= len as i64 {
                return 2 * self.ack.rcv_mss;
            }
            truesize >>= 1;
            window >>= 1;
        }
        0
    }

    /// `tcp_receive_window`: what is left of the window last advertised.
    pub(crate) fn receive_window(&self) -> u32 {
        (self.rcv_wup + self.rcv_wnd as u64).saturating_sub(self.rcv_nxt) as u32
    }

    /// `__tcp_select_window`: the window the buffer allows now: zero when less than
    /// half the full space is free and that is below an MSS or 1/16 of the buffer
    /// (receiver SWS avoidance), never above `rcv_ssthresh`, rounded up to the scale.
    /// Under memory pressure (`mem`) a window half used is held to four segments.
    /// With `net.ipv4.tcp_shrink_window` (Linux 6.5+) and a window scale, the free
    /// space itself is offered ([`Tcb::shrinkable_window`]).
    pub(crate) fn compute_window(&mut self, mem: &TcpMem, cfg: &Config) -> u32 {
        let mut mss = self.ack.rcv_mss as i64;
        let free = self.tcp_space();
        let allowed = self.full_space() as i64;
        let full = (self.window_clamp as i64).min(allowed);
        if mss > full {
            mss = full;
            if mss <= 0 {
                return 0;
            }
        }
        // "Only allow window shrink if the sysctl is enabled and we have a non-zero
        // scaling factor in effect."
        if cfg.tcp_shrink_window && self.rx_opt.rcv_wscale != 0 {
            return self.shrinkable_window(mem, free, allowed, full, mss);
        }
        let mut free = free;
        let unit = 1i64 << self.rx_opt.rcv_wscale;
        if free < full >> 1 {
            self.ack.quick = 0;
            if mem.under_pressure() {
                self.adjust_rcv_ssthresh();
            }
            free = free.max(0) / unit * unit;
            if free < allowed >> 4 || free < mss {
                return 0;
            }
        }
        let free = free.min(self.rcv_ssthresh as i64);
        if self.rx_opt.rcv_wscale != 0 {
            return ((free + unit - 1) / unit * unit) as u32;
        }
        let mut window = self.rcv_wnd as i64;
        if window <= free - mss || window > free {
            window = free / mss * mss;
        } else if mss == full && free > window + (full >> 1) {
            window = free;
        }
        window as u32
    }

    /// `__tcp_select_window`'s `shrink_window_allowed:` (commit b650d953cd39, "tcp:
    /// enforce receive buffer memory limits by allowing the tcp window to shrink"):
    /// the free space rounded down to the scale, zero when it is below an MSS, 1/16
    /// of the buffer or one scale unit once less than half the full space is free,
    /// at most `rcv_ssthresh` rounded up to the scale.
    fn shrinkable_window(
        &mut self,
        mem: &TcpMem,
        free: i64,
        allowed: i64,
        full: i64,
        mss: i64,
    ) -> u32 {
        let unit = 1i64 << self.rx_opt.rcv_wscale;
        let mut free = free.max(0) / unit * unit;
        if free < full >> 1 {
            self.ack.quick = 0;
            if mem.under_pressure() {
                self.adjust_rcv_ssthresh();
            }
            if free < allowed >> 4 || free < mss || free < unit {
                return 0;
            }
        }
        if free > self.rcv_ssthresh as i64 {
            free = (self.rcv_ssthresh as i64 + unit - 1) / unit * unit;
        }
        free as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::TcpState;

    /// This machine's kernel's sysctls: `tcp_rmem` = 4096 131072 33554432.
    fn kernel_cfg() -> Config {
        Config {
            tcp_rmem: [4096, 131072, 33_554_432],
            ..Config::default()
        }
    }

    /// A receiver after the handshake with this machine's kernel's defaults:
    /// timestamps, window scaling, MSS 1460 (1448 of payload).
    fn passive_established(cfg: &Config) -> Tcb {
        let mut t = Tcb::for_test(cfg);
        t.state = TcpState::SynRecv;
        t.rx_opt.tstamp_ok = true;
        t.rcv_nxt = 1;
        t.rcv_wup = 1;
        t.advmss = 1460;
        t.mss_cache = 1448;
        let mss = t.initial_window_mss();
        t.select_initial_window(cfg, mss, true, 0);
        t.state = TcpState::Established;
        t.init_rcv_buffer_space(cfg);
        t
    }

    /// `tcp_app_win`: `maxwin >> tcp_app_win` of the 65536-byte full space is kept
    /// back (1: half, 2: a quarter); the default 31 keeps none, so only the
    /// one-segment reservation applies; 0 turns both off ("if (tcp_app_win && ...)"
    /// guards each): the clamp is the whole space.
    #[test]
    fn tcp_app_win_keeps_part_of_the_window_for_the_application() {
        let clamp = |app_win: u8| {
            let cfg = Config {
                tcp_app_win: app_win,
                ..kernel_cfg()
            };
            passive_established(&cfg).window_clamp
        };
        assert_eq!(clamp(1), 32768);
        assert_eq!(clamp(2), 49152);
        assert_eq!(clamp(0), 65536);
        assert_eq!(clamp(31), 64088);
    }

    /// Linux 6.18 (tcpdump on veth, this machine): the SYN carries 64240 (44 x 1460)
    /// and the SYN-ACK 65160 (45 x 1448) from a 131072-byte buffer at the default
    /// 50 % ratio, both with window scale 10 (tcp_rmem[2] = 32 MB).
    #[test]
    fn initial_windows_as_this_kernel() {
        let cfg = kernel_cfg();
        let mut a = Tcb::for_test(&cfg);
        a.state = TcpState::SynSent;
        a.advmss = 1460;
        let mss = a.initial_window_mss();
        a.select_initial_window(&cfg, mss, true, 0);
        assert_eq!((a.rcv_wnd, a.rx_opt.rcv_wscale), (64240, 10));
        let p = passive_established(&cfg);
        assert_eq!((p.rcv_wnd, p.rx_opt.rcv_wscale), (65160, 10));
        // tcp_init_buffer_space: one segment reserved; ten segments expected.
        assert_eq!(
            (p.window_clamp, p.rcv_ssthresh, p.rcvq_space),
            (64088, 64088, 14480)
        );
        assert_eq!((p.advmss, p.ack.rcv_mss), (1448, 536));
    }

    /// A locked `SO_RCVBUF` clamps the window and scales for its own size; measured
    /// on this machine's 6.18 over loopback (MSS 65495, timestamps on):
    /// SO_RCVBUF 65536: SYN win 65495 wscale 1, SYN-ACK 65483; SO_RCVBUF 8192:
    /// 8192, wscale 0; SO_RCVBUF 1000000: wscale 4, rcv_ssthresh 934517,
    /// rcv_space 654830 once established.
    #[test]
    fn locked_receive_buffer_as_this_kernel() {
        let cfg = kernel_cfg();
        let open = |bytes: u32, passive: bool| {
            let mut t = Tcb::for_test(&cfg);
            t.set_rcvbuf(bytes);
            t.state = if passive {
                TcpState::SynRecv
            } else {
                TcpState::SynSent
            };
            t.rx_opt.tstamp_ok = passive;
            t.advmss = 65495;
            t.mss_cache = 65483;
            let mss = t.initial_window_mss();
            t.select_initial_window(&cfg, mss, true, 0);
            t
        };
        let a = open(65536, false);
        assert_eq!((a.rcv_wnd, a.rx_opt.rcv_wscale), (65495, 1));
        assert_eq!(open(65536, true).rcv_wnd, 65483);
        let a = open(8192, false);
        assert_eq!((a.rcv_wnd, a.rx_opt.rcv_wscale), (8192, 0));
        let mut a = open(1_000_000, false);
        assert_eq!((a.rcv_wnd, a.rx_opt.rcv_wscale), (15 * 65495, 4));
        a.rx_opt.tstamp_ok = true;
        a.state = TcpState::Established;
        a.init_rcv_buffer_space(&cfg);
        assert_eq!((a.rcv_ssthresh, a.rcvq_space), (934_517, 654_830));
    }

    /// Linux 6.18's ACKs to the first segments (veth, 20 ms RTT, unread data): win 67,
    /// 70, 73 (x 1024): the first full segment sets the ratio (clamp 81920 at ratio
    /// 160, rcv_ssthresh to rcv_wnd), then each segment adds two, until the free
    /// buffer limits the window (75 at the fourth segment).
    #[test]
    fn window_grows_two_segments_per_segment_as_this_kernel() {
        let cfg = kernel_cfg();
        let mut t = passive_established(&cfg);
        let mut st = crate::tcp::TestStack::default();
        let mut wins = Vec::new();
        for i in 0..5u64 {
            let mut ctx = st.ctx(&cfg, crate::time::Instant(1_000_000_000), false);
            let th = lowtide_wire::tcp::TcpRepr::default();
            t.data_queue(
                &mut ctx,
                &th,
                1 + i * 1448,
                crate::tcp::rcvqueue::Payload::Flat(&[0u8; 1448]),
            );
            wins.push(t.select_window(&mut ctx));
        }
        // Truesize 2304 per segment (ratio 160) as the kernel's: the same windows,
        // also once the buffer limits them (75, 74 at the fourth and fifth).
        assert_eq!(t.scaling_ratio, 160);
        assert_eq!(wins, [67, 70, 73, 75, 74]);
    }

    /// `tcp_data_queue_ofo` grows the window for data above a hole when SACK is on
    /// (a lossy path keeps a hole open most of the time), not without SACK.
    #[test]
    fn data_above_a_hole_grows_the_window_with_sack_only() {
        let cfg = kernel_cfg();
        for sack in [true, false] {
            let mut t = passive_established(&cfg);
            t.rx_opt.sack_ok = sack;
            let mut st = crate::tcp::TestStack::default();
            let mut ctx = st.ctx(&cfg, crate::time::Instant(1_000_000_000), false);
            let th = lowtide_wire::tcp::TcpRepr::default();
            t.data_queue(
                &mut ctx,
                &th,
                1 + 1448,
                crate::tcp::rcvqueue::Payload::Flat(&[0u8; 1448]),
            );
            assert_eq!(t.ofo.bytes(), 1448);
            // The ratio measured first lets rcv_ssthresh reach rcv_wnd (65160).
            let grown = if sack { 65160 + 2 * 1448 } else { 65160 };
            assert_eq!(t.rcv_ssthresh, grown, "sack {sack}");
        }
    }

    /// Linux 6.18 through packetdrill's tun (tests/packetdrill/
    /// rcv-dsack-ofo-overlaps-and-window.pkt, `tcpi_rcv_ssthresh` 276776 and
    /// `tcpi_rcv_ooopack` 8 there): a packet is never GSO, so a 4500-byte packet
    /// above a hole is measured whole (`tcp_measure_rcv_mss`: ratio from its
    /// truesize, a 3712-byte kmalloc head plus a page: 8448), counts one
    /// `rcv_ooopack`, and `tcp_data_queue_ofo` grows the window by twice its length
    /// before `skb_set_owner_r` charges it (with it charged there is no room).
    #[test]
    fn a_tun_packet_above_a_hole_is_measured_whole_and_grows_before_its_charge() {
        let cfg = Config {
            tcp_rmem: [4096, 540_000, 15_728_640],
            rx_alloc: crate::tcp::skbuff::RxAlloc::Tun,
            ..Config::default()
        };
        let mut t = Tcb::for_test(&cfg);
        t.state = TcpState::SynRecv;
        t.rx_opt.sack_ok = true;
        t.rx_opt.snd_wscale = 7;
        (t.rcv_nxt, t.rcv_wup, t.advmss, t.mss_cache) = (1, 1, 1460, 1000);
        let mss = t.initial_window_mss();
        t.select_initial_window(&cfg, mss, true, 0);
        t.state = TcpState::Established;
        t.init_rcv_buffer_space(&cfg);
        let mut st = crate::tcp::TestStack::default();
        let segs = [
            (1, 1000),
            (3001, 1000),
            (3001, 1000),
            (3501, 1000),
            (5001, 1000),
            (5001, 2000),
            (8001, 1000),
            (10001, 1000),
        ];
        let th = lowtide_wire::tcp::TcpRepr::default();
        let mut feed = |t: &mut Tcb, seq: u64, len: usize| {
            let mut ctx = st.ctx(&cfg, crate::time::Instant(1_000_000_000), false);
            t.rx_pkt_len = len as u32 + 40;
            let data = vec![0u8; len];
            t.data_queue(
                &mut ctx,
                &th,
                seq,
                crate::tcp::rcvqueue::Payload::Flat(&data),
            );
            t.select_window(&mut ctx);
        };
        for (seq, len) in segs {
            feed(&mut t, seq, len);
        }
        assert_eq!((t.rcv_ssthresh, t.rcv_ooopack), (246_796, 7));
        feed(&mut t, 7501, 4500);
        assert_eq!(t.ack.rcv_mss, 1460);
        assert_eq!(t.scaling_ratio, (4500u32 * 256 / 8448) as u8);
        assert_eq!((t.rcv_ssthresh, t.rcv_ooopack), (276_776, 8));
    }

    /// `net.ipv4.tcp_shrink_window` (Linux 6.5+): with a window scale the free space
    /// itself is offered, rounded down to the scale (rcv_ssthresh rounded up), zero
    /// below one scale unit, and `tcp_select_window` lets the right edge move back;
    /// without it the edge holds and a wanted zero window is counted
    /// (TcpExtTCPWantZeroWindowAdv).
    #[test]
    fn tcp_shrink_window_lets_a_scaled_window_shrink() {
        let mut cfg = kernel_cfg();
        let seg = crate::tcp::skbuff::rx_truesize(1448);
        let fill = |t: &mut Tcb, n: usize| {
            for _ in 0..n {
                t.rcv_queue.push(vec![0u8; 1448].into(), seg);
            }
        };
        let mut st = crate::tcp::TestStack::default();
        for shrink in [false, true] {
            cfg.tcp_shrink_window = shrink;
            let mut t = passive_established(&cfg);
            t.ack.rcv_mss = 1448;
            let mut ctx = st.ctx(&cfg, crate::time::Instant(1_000_000_000), false);
            // The SYN-ACK offered 65160: kept (ALIGN 65536), or ALIGN(rcv_ssthresh
            // 64088, 1024) once it may shrink.
            let w = t.select_window(&mut ctx);
            assert_eq!(w, if shrink { 63 } else { 64 });
            // 40 segments unread: 19,456 bytes of window free (see below).
            fill(&mut t, 40);
            let w = t.select_window(&mut ctx);
            assert_eq!(w, if shrink { 19 } else { 64 }, "shrink {shrink}");
            // 57: less than an MSS free: zero, offered only when shrinking.
            fill(&mut t, 17);
            let w = t.select_window(&mut ctx);
            assert_eq!(w, if shrink { 0 } else { 64 }, "shrink {shrink}");
            assert_eq!(
                ctx.mib.get(crate::mib::Mib::TcpExtTCPWantZeroWindowAdv),
                1,
                "counted when not shrinking (the stack's counters add up)"
            );
            assert_eq!(
                ctx.mib.get(crate::mib::Mib::TcpExtTCPToZeroWindowAdv),
                shrink as u64
            );
        }
        // Unscaled, the window never shrinks.
        let mut t = passive_established(&cfg);
        t.rx_opt.rcv_wscale = 0;
        t.ack.rcv_mss = 1448;
        fill(&mut t, 57);
        let mut ctx = st.ctx(&cfg, crate::time::Instant(1_000_000_000), false);
        let cur = t.receive_window();
        assert_eq!(t.select_window(&mut ctx) as u32, cur.min(65535));
        // tcp_workaround_signed_windows: 32767 at most, unscaled.
        cfg.tcp_workaround_signed_windows = true;
        let mut t = passive_established(&cfg);
        t.rx_opt.rcv_wscale = 0;
        let mut ctx = st.ctx(&cfg, crate::time::Instant(1_000_000_000), false);
        assert_eq!(t.select_window(&mut ctx), 32767);
        let mut a = Tcb::for_test(&cfg);
        a.state = TcpState::SynSent;
        a.advmss = 1460;
        a.select_initial_window(&cfg, 1460, false, 0);
        assert_eq!(a.rcv_wnd, 32767);
    }

    /// `__tcp_select_window` never offers more than `rcv_ssthresh`, rounds down to the
    /// scale once less than half the full space is free, and offers zero when the
    /// free space is below one MSS.
    #[test]
    fn window_follows_the_free_space() {
        let cfg = kernel_cfg();
        let mut t = passive_established(&cfg);
        assert_eq!(t.compute_window(&TcpMem::default(), &cfg), 64512); // ALIGN(rcv_ssthresh 64088, 1024)
        t.ack.rcv_mss = 1448;
        // 40 unread segments cost 40 x 2304 of 131072: 38,912 bytes free, 19,456 of
        // window (ratio 128) < 32,044 (half the clamp): rounded down to 1024.
        let seg = crate::tcp::skbuff::rx_truesize(1448);
        for _ in 0..40 {
            t.rcv_queue.push(vec![0u8; 1448].into(), seg);
        }
        assert_eq!(t.compute_window(&TcpMem::default(), &cfg), 19 * 1024);
        for _ in 0..17 {
            t.rcv_queue.push(vec![0u8; 1448].into(), seg);
        }
        assert_eq!(t.compute_window(&TcpMem::default(), &cfg), 0);
    }
}
