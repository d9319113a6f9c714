//! Delayed ACKs timed as Linux times them (tcp_input.c `__tcp_ack_snd_check`, `tcp_event_data_recv`,
//! `tcp_incr_quickack`, `tcp_enter_quickack_mode`; tcp_output.c
//! `tcp_send_delayed_ack`, `tcp_event_data_sent`; tcp_timer.c
//! `tcp_delack_timer_handler`): the ACK timeout `ato` follows the peer's
//! inter-arrival time, doubles when a delayed ACK had to be sent alone, and a
//! connection that answers what it receives (pingpong mode, request/response)
//! stops quick-ACKing so that its ACKs ride on its replies.

use super::consts::{
    TCP_ATO_MIN, TCP_DELACK_MAX, TCP_DELACK_MIN, TCP_MAX_QUICKACKS, TCP_MIN_MSS, TCP_MSS_DEFAULT,
};
use super::sock::Tcb;
use crate::config::Config;
use crate::time::Instant;
use core::time::Duration;
use lowtide_wire::tcp::{TcpFlags, TcpRepr};

/// `ICSK_ACK_PUSHED`: a segment that looks like the end of a write arrived.
pub(crate) const ICSK_ACK_PUSHED: u8 = 1;
/// `ICSK_ACK_PUSHED2`: two such segments since the last ACK.
pub(crate) const ICSK_ACK_PUSHED2: u8 = 2;

/// HZ/2: the longest delay otherwise (before the RTT bound).
const MAX_ATO: Duration = Duration::from_millis(500);

/// `jiffies` at `now`, as a time: the start of the current jiffy.
fn jiffies(now: Instant) -> Instant {
    Instant::from_jiffies(now.jiffies())
}

impl Tcb {
    /// `tcp_event_data_recv`'s ACK timing for in-order data arriving now: `ato`
    /// from the gap since the previous in-order data, which `icsk_ack.lrcvtime`
    /// (tcpi_last_data_recv) records; no other segment moves it.
    pub(crate) fn event_data_recv(&mut self, now: Instant) {
        let prev = core::mem::replace(&mut self.ack.lrcvtime, now);
        if self.ack.ato.is_zero() {
            // The first data: quick ACKs for slow start (tcp_incr_quickack).
            self.incr_quickack(TCP_MAX_QUICKACKS);
            self.ack.ato = TCP_ATO_MIN;
            return;
        }
        let m = now.saturating_since(prev);
        if m <= TCP_ATO_MIN / 2 {
            self.ack.ato = self.ack.ato / 2 + TCP_ATO_MIN / 2;
        } else if m < self.ack.ato {
            self.ack.ato = (self.ack.ato / 2 + m).min(self.icsk.rto);
        } else if m > self.icsk.rto {
            // "Too long gap": the sender failed to restart its window; ACK quickly.
            self.incr_quickack(TCP_MAX_QUICKACKS);
        }
    }

    /// `tcp_measure_rcv_mss`'s branch for a segment of `seg` bytes under `th` below
    /// `rcv_mss` (`lss`: the last small segment's size): two full segments of one
    /// smaller size in a row set `rcv_mss`; anything else looks like the end of a
    /// write and marks the ACK `ICSK_ACK_PUSHED` (twice: `ICSK_ACK_PUSHED2`), so that
    /// `__tcp_cleanup_rbuf` ACKs it once the reader drains it.
    pub(crate) fn measure_small_segment(&mut self, th: &TcpRepr, seg: u32, lss: u32) {
        // "len" with the TCP header: a segment at least RFC 1122's default size, or
        // one without FIN/URG/SYN/PSH (TCP_REMNANT), is a full segment of a small MSS
        // when two in a row have the same size.
        let with_header = seg as usize + th.header_len();
        let remnant = TcpFlags::FIN.0 | TcpFlags::URG.0 | TcpFlags::SYN.0 | TcpFlags::PSH.0;
        if with_header >= TCP_MSS_DEFAULT as usize + 20
            || (with_header >= TCP_MIN_MSS as usize + 20 && th.flags.0 & remnant == 0)
        {
            let len = with_header.saturating_sub(self.tcp_header_len()) as u32;
            self.ack.last_seg_size = len;
            if len == lss {
                self.ack.rcv_mss = len;
                return;
            }
        }
        if self.ack.pushed & ICSK_ACK_PUSHED != 0 {
            self.ack.pushed |= ICSK_ACK_PUSHED2;
        }
        self.ack.pushed |= ICSK_ACK_PUSHED;
    }

    /// `tp->tcp_header_len`: the TCP header of our segments without SACK blocks.
    fn tcp_header_len(&self) -> usize {
        20 + if self.rx_opt.tstamp_ok { 12 } else { 0 }
    }

    /// `__tcp_cleanup_rbuf`'s first test, after a read of `copied` bytes with an ACK
    /// owed: more than one segment unacknowledged (the once-per-two-segments ACK
    /// tcp_input.c left to the reader), or the read drained everything after a
    /// pushed segment (`ICSK_ACK_PUSHED2`, or `ICSK_ACK_PUSHED` outside pingpong).
    pub(crate) fn read_needs_ack(&self, cfg: &Config, copied: usize) -> bool {
        if !self.ack.pending {
            return false;
        }
        let drained = self.rcv_queue.is_empty() && self.ofo.is_empty();
        let pushed = self.ack.pushed & ICSK_ACK_PUSHED2 != 0
            || (self.ack.pushed & ICSK_ACK_PUSHED != 0 && !self.in_pingpong_mode(cfg));
        self.rcv_nxt - self.rcv_wup > self.ack.rcv_mss as u64 || (copied > 0 && pushed && drained)
    }

    /// `tcp_incr_quickack`: up to `max` quick ACKs, as many as half the window in
    /// segments (at least 2).
    fn incr_quickack(&mut self, max: u32) {
        let quickacks = match self.rcv_wnd / (2 * self.ack.rcv_mss.max(1)) {
            0 => 2,
            n => n,
        };
        self.ack.quick = self.ack.quick.max(quickacks.min(max));
    }

    /// `tcp_enter_quickack_mode`: quick ACKs, out of pingpong mode, `ato` back to
    /// its minimum (a duplicate or out-of-window segment arrived).
    pub(crate) fn enter_quickack_mode(&mut self, max: u32) {
        self.incr_quickack(max);
        self.ack.pingpong = 0;
        self.ack.ato = TCP_ATO_MIN;
    }

    /// `inet_csk_in_pingpong_mode`: at least `net.ipv4.tcp_pingpong_thresh`
    /// replies (read at every use, as Linux 6.x does).
    pub(crate) fn in_pingpong_mode(&self, cfg: &Config) -> bool {
        self.ack.pingpong >= cfg.tcp_pingpong_thresh
    }

    /// `inet_csk_enter_pingpong_mode`: the count set to the threshold.
    pub(crate) fn enter_pingpong_mode(&mut self, cfg: &Config) {
        self.ack.pingpong = cfg.tcp_pingpong_thresh;
    }

    /// `tcp_in_quickack_mode`: the route says `quickack`, or quick ACKs are left
    /// and not in pingpong mode.
    pub(crate) fn in_quickack_mode(&self, cfg: &Config) -> bool {
        self.ack.dst_quick_ack || (self.ack.quick > 0 && !self.in_pingpong_mode(cfg))
    }

    /// `tcp_event_data_sent`: data sent within `ato` of the last receipt is a reply
    /// (`inet_csk_inc_pingpong_cnt`, up to 255).
    pub(crate) fn event_data_sent(&mut self, now: Instant) {
        if now.saturating_since(self.ack.lrcvtime) < self.ack.ato {
            self.ack.pingpong = self.ack.pingpong.saturating_add(1);
        }
    }

    /// `tcp_send_delayed_ack`: the ACK owed waits `delack_timeout`. With the timer
    /// already pending, the ACK goes at once if that timer would expire within a
    /// quarter of the new delay; otherwise the earlier of the two timeouts stays.
    /// Before any data `ato` is 0: `sk_reset_timer(.., jiffies + 0)`, which the
    /// timer wheel runs at the next tick, not at once (`calc_index` rounds every
    /// expiry up, [`crate::time::timer_list_runs`]): a segment arriving within the
    /// same jiffy (HZ 1000 here) finds the ACK still owed (an out-of-window
    /// duplicate then sends it at once with its D-SACK, `tcp_send_dupack` or the
    /// "about to expire" rule below). The handler sends the ACK
    /// (`tcp_delack_timer_handler`: TcpExtDelayedACKs, pingpong left).
    pub(crate) fn send_delayed_ack(&mut self, ctx: &mut super::Ctx) {
        let ato = self.delack_timeout(ctx.cfg);
        let (mut timeout, soon) = (jiffies(ctx.now) + ato, jiffies(ctx.now) + ato / 4);
        if let Some(pending) = self.ack.timeout {
            // "If delack timer is about to expire, send ACK now."
            if pending <= soon {
                return self.send_ack(ctx);
            }
            timeout = timeout.min(pending);
        }
        self.ack.pending = true;
        self.ack.timeout = Some(timeout);
    }

    /// `tcp_dec_quickack_mode` (from `tcp_event_ack_sent`, for every segment sent):
    /// only a segment carrying an ACK that was owed (`inet_csk_ack_scheduled`) uses
    /// a quick ACK; using the last one deflates `ato` to `TCP_ATO_MIN`.
    pub(crate) fn dec_quickack_mode(&mut self) {
        if self.ack.quick == 0 {
            return;
        }
        let pkts = self.ack.pending as u32;
        if pkts >= self.ack.quick {
            self.ack.quick = 0;
            self.ack.ato = TCP_ATO_MIN;
        } else {
            self.ack.quick -= pkts;
        }
    }

    /// `tcp_delack_max` (Linux 6.7+, on `tcp_rto_min` since 6.15): the longest
    /// delayed-ACK timeout, `icsk_delack_max` (`TCP_DELACK_MAX`; only BPF changes
    /// it) kept one jiffy below the RTO's floor, so a delayed ACK never outwaits
    /// the peer's RTO: 199 ms with the default 200 ms `rto_min`.
    pub(crate) fn delack_max(&self) -> Duration {
        let rto_min_jiffies = self.rto_min().as_micros().div_ceil(1000).max(2) as u64;
        TCP_DELACK_MAX.min(Duration::from_millis(rto_min_jiffies - 1))
    }

    /// `tcp_send_delayed_ack`'s timeout: `ato`, above `TCP_DELACK_MIN` bounded by
    /// the smoothed RTT and by 500 ms (`tcp_delack_max` in pingpong mode or after
    /// a push), never more than `tcp_delack_max`.
    pub(crate) fn delack_timeout(&self, cfg: &Config) -> Duration {
        let delack_max = self.delack_max();
        let mut ato = self.ack.ato;
        if ato > TCP_DELACK_MIN {
            let pushed = self.ack.pushed & ICSK_ACK_PUSHED != 0;
            let mut max_ato = if self.in_pingpong_mode(cfg) || pushed {
                delack_max
            } else {
                MAX_ATO
            };
            if self.rtt.srtt_us > 0 {
                let rtt = Duration::from_micros(self.rtt.srtt_us as u64).max(TCP_DELACK_MIN);
                max_ato = max_ato.min(rtt);
            }
            ato = ato.min(max_ato);
        }
        ato.min(delack_max)
    }

    /// `tcp_rcv_synsent_state_process`'s ACK of the SYN-ACK: saved when a writer
    /// waits to send on this connection (`sk_write_pending`: its data, sent at once,
    /// carries the ACK), the socket has `TCP_DEFER_ACCEPT` set
    /// (`icsk_accept_queue.rskq_defer_accept`, which `do_tcp_setsockopt` sets on a
    /// connecting socket too) or it is in pingpong mode (`TCP_QUICKACK` 0): the ACK
    /// is scheduled, the connection enters quick-ACK mode, and the delayed-ACK timer
    /// runs for `TCP_DELACK_MAX`. Otherwise it goes at once (`tcp_send_ack`).
    pub(crate) fn synsent_ack(&mut self, ctx: &mut super::Ctx) {
        let save = self.write_pending > 0 || self.req.defer_accept > 0;
        if !save && !self.in_pingpong_mode(ctx.cfg) {
            // tcp_send_ack_reflect_ect: on AccECN, ACE echoes the SYN-ACK's IP-ECN.
            self.accecn.reflect = self.ecn_mode_accecn();
            self.send_ack(ctx);
            self.accecn.reflect = false;
            return;
        }
        self.ack.pending = true;
        self.enter_quickack_mode(TCP_MAX_QUICKACKS);
        self.ack.timeout = Some(ctx.now + TCP_DELACK_MAX);
    }

    /// `__tcp_sock_set_quickack` (`TCP_QUICKACK`): 0 enters pingpong mode (ACKs
    /// wait for replies); non-zero leaves it and, with an ACK owed in ESTABLISHED or
    /// CLOSE-WAIT, sends it as a drained read of a pushed segment would
    /// (`tcp_cleanup_rbuf`), an even value going back to pingpong mode after.
    pub(crate) fn set_quickack(&mut self, ctx: &mut super::Ctx, val: i32) {
        if val == 0 {
            return self.enter_pingpong_mode(ctx.cfg);
        }
        self.ack.pingpong = 0;
        if matches!(
            self.state,
            super::TcpState::Established | super::TcpState::CloseWait
        ) && self.ack.pending
        {
            self.ack.pushed |= ICSK_ACK_PUSHED;
            self.cleanup_rbuf(ctx, 1);
            if val & 1 == 0 {
                self.enter_pingpong_mode(ctx.cfg);
            }
        }
    }

    /// `TCP_QUICKACK` (getsockopt): not in pingpong mode.
    pub(crate) fn quickack(&self, cfg: &Config) -> bool {
        !self.in_pingpong_mode(cfg)
    }

    /// `tcp_delack_timer_handler` with an ACK owed: the delay was too short, so
    /// `ato` doubles (up to the RTO); in pingpong mode the reply did not come, so
    /// the connection leaves it and `ato` falls back to its minimum.
    pub(crate) fn delack_missed(&mut self, cfg: &Config) {
        if self.in_pingpong_mode(cfg) {
            self.ack.pingpong = 0;
            self.ack.ato = TCP_ATO_MIN;
        } else {
            self.ack.ato = (self.ack.ato * 2).min(self.icsk.rto);
        }
    }

    /// Schedules an immediate ACK (`ICSK_ACK_NOW`, or `tcp_send_ack` at once).
    pub(crate) fn schedule_ack_now(&mut self) {
        self.ack.pending = true;
        self.ack.now = true;
    }

    /// `__tcp_ack_snd_check`: ACK now if more than one full segment is unacknowledged
    /// or in quick-ACK mode; with out-of-order data held, now or compressed
    /// (`tcp/compsack.rs`); otherwise delay by `tcp_send_delayed_ack`'s timeout
    /// (`send_delayed_ack`).
    pub(crate) fn ack_snd_check(&mut self, ctx: &mut super::Ctx) {
        if !self.ack.pending {
            return;
        }
        let unacked = self.rcv_nxt - self.rcv_wup;
        // "... and right edge of window advances far enough. [...] If application
        // uses SO_RCVLOWAT, we want send ack now if we have not received enough
        // bytes to satisfy the condition."
        let now_needed = unacked > self.ack.rcv_mss as u64
            && (self.rcv_nxt - self.copied_seq < self.rcvlowat as u64
                || self.compute_window(ctx.mem, ctx.cfg) >= self.rcv_wnd)
            || self.in_quickack_mode(ctx.cfg)
            || self.ack.now;
        if now_needed {
            self.send_ack(ctx);
        } else if !self.ofo.is_empty() {
            self.ack_or_compress(ctx);
        } else {
            self.send_delayed_ack(ctx);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::tcp::{TcpState, TestStack};

    fn established(cfg: &Config) -> Tcb {
        let mut t = Tcb::for_test(cfg);
        t.state = TcpState::Established;
        (t.rcv_nxt, t.rcv_wup, t.rcv_wnd, t.ack.rcv_mss) = (1001, 1001, 10_720, 536);
        t.icsk.rto = Duration::from_millis(300);
        t.rtt.srtt_us = 100_000;
        t
    }

    /// `tcp_rcv_synsent_state_process`: the ACK of the SYN-ACK goes at once unless a
    /// writer waits, `TCP_DEFER_ACCEPT` is set (`rskq_defer_accept`) or the socket
    /// is in pingpong mode; then it is scheduled for `TCP_DELACK_MAX` in quick-ACK
    /// mode (tests/packetdrill/synack-ack-saved-defer-accept.pkt).
    #[test]
    fn synsent_ack_saved_for_writer_defer_accept_or_pingpong() {
        let cfg = Config::default();
        for name in ["plain", "writer", "defer_accept", "pingpong"] {
            let mut st = TestStack::default();
            let mut t = established(&cfg);
            match name {
                "writer" => t.write_pending = 1,
                "defer_accept" => t.req.defer_accept = 1,
                "pingpong" => t.ack.pingpong = 1,
                _ => {}
            }
            let saved = name != "plain";
            let mut ctx = st.ctx(&cfg, Instant::ZERO, false);
            t.synsent_ack(&mut ctx);
            assert_eq!(ctx.out.len(), !saved as usize, "{name}");
            assert_eq!(t.ack.pending, saved, "{name}");
            let timer = saved.then_some(Instant::ZERO + TCP_DELACK_MAX);
            assert_eq!(t.ack.timeout, timer, "{name}");
        }
    }

    /// `inet_csk_in_pingpong_mode` reads `net.ipv4.tcp_pingpong_thresh` at every
    /// use: replies counted (`inet_csk_inc_pingpong_cnt`) reach it or not as the
    /// sysctl moves; entering the mode (`TCP_QUICKACK` 0, `tcp_fin`) sets the count
    /// to it, a missed delayed ACK leaves it.
    #[test]
    fn pingpong_threshold_is_a_live_sysctl() {
        let mut cfg = Config::default();
        let mut st = TestStack::default();
        let mut t = established(&cfg);
        t.ack.ato = TCP_ATO_MIN;
        t.ack.lrcvtime = Instant::ZERO;
        let reply = |t: &mut Tcb| t.event_data_sent(Instant::ZERO + Duration::from_millis(1));
        reply(&mut t);
        assert!(t.in_pingpong_mode(&cfg), "default 1: one reply");
        cfg.tcp_pingpong_thresh = 3;
        assert!(!t.in_pingpong_mode(&cfg) && t.quickack(&cfg));
        reply(&mut t);
        reply(&mut t);
        assert!(t.in_pingpong_mode(&cfg));
        t.delack_missed(&cfg);
        assert_eq!(t.ack.pingpong, 0);
        t.set_quickack(&mut st.ctx(&cfg, Instant::ZERO, false), 0);
        assert_eq!(t.ack.pingpong, 3);
        // A reply long after the receipt (not within ato) does not count.
        t.ack.pingpong = 0;
        t.event_data_sent(Instant::ZERO + Duration::from_secs(1));
        assert_eq!(t.ack.pingpong, 0);
    }

    /// tcp_delack_max: TCP_DELACK_MAX kept one jiffy under tcp_rto_min (the
    /// socket's, or the route's when locked), at least one jiffy; it bounds
    /// tcp_send_delayed_ack's timeout and tcpi_ato.
    #[test]
    fn delack_max_stays_below_rto_min() {
        let mut cfg = Config::default();
        let mut t = established(&cfg);
        assert_eq!(t.delack_max(), Duration::from_millis(199));
        t.icsk.rto_min = Duration::from_millis(50);
        assert_eq!(t.delack_max(), Duration::from_millis(49));
        t.icsk.rto_min = Duration::from_micros(2500); // usecs_to_jiffies rounds up
        assert_eq!(t.delack_max(), Duration::from_millis(2));
        t.icsk.rto_min = Duration::from_millis(1);
        assert_eq!(t.delack_max(), Duration::from_millis(1), "at least a jiffy");
        t.icsk.rto_min = Duration::from_secs(1);
        assert_eq!(t.delack_max(), TCP_DELACK_MAX);
        t.icsk.rto_min = Duration::from_millis(200);
        cfg.tcp_pingpong_thresh = 1;
        t.ack.pingpong = 1;
        t.ack.ato = Duration::from_millis(400);
        t.rtt.srtt_us = 0; // no RTT bound
        assert_eq!(t.delack_timeout(&cfg), Duration::from_millis(199));
        assert_eq!(t.info(Instant::ZERO).ato, 199_000);
    }

    #[test]
    fn send_delayed_ack_with_a_timer_pending() {
        let cfg = Config::default();
        let mut st = TestStack::default();
        let mut t = established(&cfg);
        let ms = |n| Instant::ZERO + Duration::from_millis(n);
        let mut ctx = st.ctx(&cfg, ms(0), false);
        // No timer: ato (40 ms) from now.
        t.ack.ato = TCP_ATO_MIN;
        t.send_delayed_ack(&mut ctx);
        assert_eq!((t.ack.timeout, t.ack.pending), (Some(ms(40)), true));
        // 30 ms later with ato 50 ms: the timer (10 ms away) is within ato/4.
        ctx.now = ms(30);
        t.ack.ato = Duration::from_millis(50);
        t.send_delayed_ack(&mut ctx);
        assert_eq!(ctx.out.len(), 1, "sent at once");
        assert_eq!((t.ack.timeout, t.ack.pending), (None, false));
        // A later pending timer gives way to the earlier new timeout.
        t.ack.pending = true;
        t.ack.timeout = Some(ms(200));
        ctx.now = ms(40);
        t.ack.ato = Duration::from_millis(60);
        t.send_delayed_ack(&mut ctx);
        assert_eq!(t.ack.timeout, Some(ms(100)));
        // An earlier one (not about to expire) stays.
        ctx.now = ms(45);
        t.send_delayed_ack(&mut ctx);
        assert_eq!(t.ack.timeout, Some(ms(100)));
        assert_eq!(ctx.out.len(), 1);
        // ato 0 (no data yet): the timer expires in the current jiffy (the wheel
        // runs it at the next tick); its handler sends the ACK.
        t.ack.timeout = None;
        t.ack.ato = Duration::ZERO;
        t.send_delayed_ack(&mut ctx);
        assert_eq!(t.ack.timeout, Some(ms(45)));
        assert_eq!(ctx.out.len(), 1);
    }

    /// `sk_reset_timer(.., jiffies + 0)`: a zero `ato` arms the timer for the
    /// current jiffy, which the wheel runs at the next tick (HZ 1000), from
    /// anywhere inside the current jiffy; a second ACK owed
    /// within that jiffy finds it about to expire (`timeout <= jiffies + (ato >> 2)`)
    /// and goes at once, with ato 0 or with a quick-ACK mode's 40 ms.
    #[test]
    fn zero_ato_timer_waits_for_the_next_tick() {
        let cfg = Config::default();
        let mut st = TestStack::default();
        let mut t = established(&cfg);
        let us = |n| Instant::ZERO + Duration::from_micros(n);
        // At a jiffy's start and inside it: the next jiffy.
        for now in [200_000, 200_300, 200_999] {
            let mut ctx = st.ctx(&cfg, us(now), false);
            t.ack.timeout = None;
            t.ack.pending = false;
            t.ack.ato = Duration::ZERO;
            let sent = ctx.out.len();
            t.send_delayed_ack(&mut ctx);
            t.sync_timers(ctx.now);
            assert_eq!(
                (t.ack.timeout, t.ack.pending, t.next_deadline()),
                (Some(us(200_000)), true, Some(us(201_000))),
                "at {now} us"
            );
            assert_eq!(ctx.out.len(), sent, "not sent at once");
        }
        // Owed again within the same jiffy, ato still 0: sent at once.
        let mut ctx = st.ctx(&cfg, us(200_999), false);
        let sent = ctx.out.len();
        t.send_delayed_ack(&mut ctx);
        assert_eq!(
            (ctx.out.len() - sent, t.ack.timeout, t.ack.pending),
            (1, None, false)
        );
        // Owed again with ato 40 ms (tcp_enter_quickack_mode): 10 ms covers the tick.
        let mut ctx = st.ctx(&cfg, us(300_100), false);
        let sent = ctx.out.len();
        t.ack.ato = Duration::ZERO;
        t.send_delayed_ack(&mut ctx);
        assert_eq!(t.ack.timeout, Some(us(300_000)));
        t.ack.ato = TCP_ATO_MIN;
        t.send_delayed_ack(&mut ctx);
        assert_eq!((ctx.out.len() - sent, t.ack.timeout), (1, None));
        // Not owed again: the tick comes and the timer sends it.
        let mut ctx = st.ctx(&cfg, us(400_500), false);
        let sent = ctx.out.len();
        t.ack.ato = Duration::ZERO;
        t.send_delayed_ack(&mut ctx);
        t.sync_timers(ctx.now);
        ctx.now = us(400_999);
        t.on_timer(&mut ctx);
        assert_eq!(ctx.out.len(), sent, "the tick has not come");
        ctx.now = us(401_000);
        t.on_timer(&mut ctx);
        assert_eq!(ctx.out.len() - sent, 1);
        assert_eq!(ctx.mib.get(crate::mib::Mib::TcpExtDelayedACKs), 1);
    }

    #[test]
    fn quick_acks_are_used_by_acks_owed_only() {
        let cfg = Config::default();
        let mut t = established(&cfg);
        // The first data: rcv_wnd / (2 * rcv_mss) = 10 quick ACKs, ato 40 ms.
        t.event_data_recv(Instant::ZERO + Duration::from_secs(1));
        assert_eq!((t.ack.quick, t.ack.ato), (10, TCP_ATO_MIN));
        assert_eq!(t.ack.lrcvtime, Instant::ZERO + Duration::from_secs(1));
        // A segment that carries no ACK owed uses none.
        t.ack.pending = false;
        t.dec_quickack_mode();
        assert_eq!(t.ack.quick, 10);
        t.ack.pending = true;
        t.dec_quickack_mode();
        assert_eq!(t.ack.quick, 9);
        // The last one deflates ato.
        (t.ack.quick, t.ack.ato) = (1, Duration::from_millis(120));
        t.dec_quickack_mode();
        assert_eq!((t.ack.quick, t.ack.ato), (0, TCP_ATO_MIN));
        // Nothing left: nothing changes.
        t.ack.ato = Duration::from_millis(80);
        t.dec_quickack_mode();
        assert_eq!((t.ack.quick, t.ack.ato), (0, Duration::from_millis(80)));
    }

    #[test]
    fn ato_follows_the_gap_between_in_order_data() {
        let cfg = Config::default();
        let mut t = established(&cfg);
        let ms = |n| Instant::ZERO + Duration::from_millis(n);
        t.event_data_recv(ms(0));
        // 10 ms: the fastest case, ato/2 + TCP_ATO_MIN/2.
        t.event_data_recv(ms(10));
        assert_eq!(t.ack.ato, Duration::from_millis(40));
        // 30 ms (below ato): ato/2 + m.
        t.event_data_recv(ms(40));
        assert_eq!(t.ack.ato, Duration::from_millis(50));
        // Above ato, below the RTO: unchanged, no quick ACKs added.
        t.ack.quick = 0;
        t.event_data_recv(ms(140));
        assert_eq!((t.ack.ato, t.ack.quick), (Duration::from_millis(50), 0));
        // A gap longer than the RTO: quick ACKs again.
        t.event_data_recv(ms(540));
        assert_eq!(t.ack.quick, 10);
        assert_eq!(t.ack.lrcvtime, ms(540));
    }
}
