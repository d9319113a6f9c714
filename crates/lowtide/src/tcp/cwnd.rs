//! Congestion window validation (RFC 2861, RFC 7661's idea of cwnd use), as Linux
//! does it: `tcp_cwnd_validate` after each `tcp_write_xmit` that sent or was
//! cwnd-limited, `tcp_cwnd_application_limited` when the window went unused for an
//! RTO, and `tcp_slow_start_after_idle_check` / `tcp_cwnd_restart` when a new skb is
//! queued after the connection sat idle (include/net/tcp.h, tcp_output.c).

use super::cong::{CaEvent, CaState};
use super::sock::Tcb;
use super::{Ctx, TcpState};
use crate::time::Instant;

impl Tcb {
    /// `tcp_slow_start_after_idle_check` (from `tcp_skb_entail`): with
    /// `net.ipv4.tcp_slow_start_after_idle`, nothing in flight and no congestion
    /// control of its own (`cong_control`, BBR), an idle period longer than the RTO
    /// restarts the window.
    pub(crate) fn slow_start_after_idle_check(&mut self, ctx: &mut Ctx) {
        if !ctx.cfg.tcp_slow_start_after_idle
            || self.rtx.packets_out > 0
            || self.cc.has_cong_control()
        {
            return;
        }
        let idle = ctx.now.saturating_since(self.lsndtime);
        if idle > self.icsk.rto {
            self.cwnd_restart(self.init_cwnd(ctx.cfg), idle, ctx.now);
        }
    }

    /// `tcp_cwnd_restart`
    /// ([RFC 2861 section 3](https://www.rfc-editor.org/rfc/rfc2861#section-3)): ssthresh
    /// keeps three quarters of the window (`tcp_current_ssthresh`), and cwnd halves once
    /// per RTO of idle time, down to the initial window (or the window, if smaller).
    fn cwnd_restart(&mut self, initcwnd: u32, idle: core::time::Duration, now: Instant) {
        let ca_ctx = self.ca_ctx(now);
        self.cc
            .cwnd_event(&mut self.cw, CaEvent::CwndRestart, &ca_ctx);
        self.cw.snd_ssthresh = self.current_ssthresh();
        let mut cwnd = self.cw.snd_cwnd;
        let restart_cwnd = initcwnd.min(cwnd);
        let mut left = idle;
        while left > self.icsk.rto && cwnd > restart_cwnd {
            left -= self.icsk.rto;
            cwnd >>= 1;
        }
        self.cw.snd_cwnd = cwnd.max(restart_cwnd);
        self.snd_cwnd_stamp = now;
        self.snd_cwnd_used = 0;
    }

    /// `tcp_cwnd_validate`: remembers for the current window whether cwnd limited
    /// us, else the largest flight (`max_packets_out`), which `tcp_is_cwnd_limited`
    /// uses in slow start. A window not filled for an RTO shrinks
    /// (`tcp_cwnd_application_limited`); a flight limited by the send buffer starts
    /// the sndbuf-limited chrono.
    pub(crate) fn cwnd_validate(&mut self, ctx: &mut Ctx, is_cwnd_limited: bool) {
        let packets_out = self.rtx.packets_out;
        let cw = &mut self.cw;
        if self.snd_una >= cw.cwnd_usage_seq
            || is_cwnd_limited
            || (!cw.is_cwnd_limited && packets_out > cw.max_packets_out)
        {
            cw.is_cwnd_limited = is_cwnd_limited;
            cw.max_packets_out = packets_out;
            cw.cwnd_usage_seq = self.snd_nxt;
        }
        if self.cw.is_cwnd_limited() {
            // The network is fed fully.
            self.snd_cwnd_used = 0;
            self.snd_cwnd_stamp = ctx.now;
            return;
        }
        // The network starves.
        self.snd_cwnd_used = self.snd_cwnd_used.max(packets_out);
        if ctx.cfg.tcp_slow_start_after_idle
            && ctx.now.saturating_since(self.snd_cwnd_stamp) >= self.icsk.rto
            && !self.cc.has_cong_control()
        {
            self.cwnd_application_limited(self.init_cwnd(ctx.cfg), ctx.now);
        }
        // Nothing unsent and the writer out of buffer: the send buffer limits.
        if self.write_queue.is_empty()
            && self.has_sk_socket()
            && self.nospace
            && matches!(self.state, TcpState::Established | TcpState::CloseWait)
        {
            self.chrono_start(ctx.now, super::chrono::Chrono::SndbufLimited);
        }
    }

    /// `sk->sk_socket`: the socket has its `struct socket`. A child still in its
    /// listener's queue has none yet, an orphan (`sock_orphan` at close(2)) none
    /// any more.
    fn has_sk_socket(&self) -> bool {
        self.parent.is_none() && !self.sock_dead()
    }

    /// `tcp_cwnd_application_limited` (RFC 2861's slow part): in Open state, for a
    /// socket with its `struct socket` whose writer did not run out of send buffer
    /// (`SOCK_NOSPACE`), cwnd moves halfway down to the most it used (at least the
    /// initial window), ssthresh keeping three quarters of the old window. An
    /// orphan keeps its window; every call restarts the stamp.
    fn cwnd_application_limited(&mut self, initcwnd: u32, now: Instant) {
        if self.ca_state == CaState::Open && self.has_sk_socket() && !self.nospace {
            let win_used = self.snd_cwnd_used.max(initcwnd);
            if win_used < self.cw.snd_cwnd {
                self.cw.snd_ssthresh = self.current_ssthresh();
                self.cw.snd_cwnd = (self.cw.snd_cwnd + win_used) >> 1;
            }
            self.snd_cwnd_used = 0;
        }
        self.snd_cwnd_stamp = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::tcp::cong::INFINITE_SSTHRESH;
    use crate::tcp::TestStack;
    use core::time::Duration;

    const RTO: Duration = Duration::from_millis(300);
    const T0: Instant = Instant(1_000_000_000);

    fn cfg(after_idle: bool) -> Config {
        Config {
            tcp_slow_start_after_idle: after_idle,
            tcp_congestion_control: "reno".into(),
            ..Config::default()
        }
    }

    /// An established Reno socket with nothing in flight, last sending at `T0`.
    fn tcb(cfg: &Config, cwnd: u32, ssthresh: u32) -> Tcb {
        let mut t = Tcb::for_test(cfg);
        t.state = TcpState::Established;
        t.icsk.rto = RTO;
        t.lsndtime = T0;
        t.snd_cwnd_stamp = T0;
        t.cw.snd_cwnd = cwnd;
        t.cw.snd_ssthresh = ssthresh;
        t
    }

    fn idle_check(t: &mut Tcb, cfg: &Config, idle: Duration) {
        let mut st = TestStack::default();
        t.slow_start_after_idle_check(&mut st.ctx(cfg, T0 + idle, false));
    }

    #[test]
    fn restart_halves_once_per_idle_rto_down_to_the_initial_window() {
        let cfg = cfg(true);
        // Idle longer than the RTO restarts; each started RTO of it halves.
        for (idle_ms, cwnd) in [(300, 160), (301, 80), (601, 40), (901, 20), (5000, 10)] {
            let mut t = tcb(&cfg, 160, INFINITE_SSTHRESH);
            idle_check(&mut t, &cfg, Duration::from_millis(idle_ms));
            assert_eq!(t.cw.snd_cwnd, cwnd, "idle {idle_ms} ms");
        }
    }

    #[test]
    fn restart_keeps_three_quarters_of_the_window_in_ssthresh() {
        let cfg = cfg(true);
        let mut t = tcb(&cfg, 8, 5);
        idle_check(&mut t, &cfg, Duration::from_secs(2));
        // cwnd 8 is below the initial window: it stays; ssthresh max(5, 4 + 2).
        assert_eq!((t.cw.snd_cwnd, t.cw.snd_ssthresh), (8, 6));
        // A larger old ssthresh stays.
        let mut t = tcb(&cfg, 8, 7);
        idle_check(&mut t, &cfg, Duration::from_secs(2));
        assert_eq!(t.cw.snd_ssthresh, 7);
    }

    #[test]
    fn no_restart_when_off_with_data_in_flight_or_for_cong_control() {
        let off = cfg(false);
        let mut t = tcb(&off, 80, INFINITE_SSTHRESH);
        idle_check(&mut t, &off, Duration::from_secs(2));
        assert_eq!(t.cw.snd_cwnd, 80);

        let on = cfg(true);
        let mut t = tcb(&on, 80, INFINITE_SSTHRESH);
        t.rtx.packets_out = 1;
        idle_check(&mut t, &on, Duration::from_secs(2));
        assert_eq!(t.cw.snd_cwnd, 80);

        let bbr = Config {
            tcp_congestion_control: "bbr".into(),
            ..on
        };
        let mut t = tcb(&bbr, 80, INFINITE_SSTHRESH);
        t.cc = crate::tcp::cong::by_name("bbr").unwrap();
        idle_check(&mut t, &bbr, Duration::from_secs(2));
        assert_eq!(t.cw.snd_cwnd, 80);
    }

    /// `tcp_ack_update_window`: a new window with data queued runs
    /// `tcp_slow_start_after_idle_check` (a zero window held the data past an RTO);
    /// with nothing queued, or the same window again, nothing restarts.
    #[test]
    fn a_window_update_on_queued_data_restarts_after_idle() {
        let cfg = cfg(true);
        let update = |queued: bool, win: u16| {
            let mut t = tcb(&cfg, 20, INFINITE_SSTHRESH);
            t.snd_wl1 = t.rcv_nxt;
            if queued {
                t.write_queue
                    .push_back(crate::tcp::rtx::skb::WriteSkb::copied(
                        t.snd_nxt,
                        bytes::BytesMut::from(&[0u8; 1000][..]).into(),
                        0,
                    ));
            }
            let th = lowtide_wire::tcp::TcpRepr {
                seq: t.rcv_seq(t.rcv_nxt).0,
                window: win,
                ..Default::default()
            };
            let mut st = TestStack::default();
            let ctx = &mut st.ctx(&cfg, T0 + Duration::from_secs(2), false);
            t.ack_update_window(ctx, &th, t.snd_una);
            t.cw.snd_cwnd
        };
        assert_eq!(update(true, 2000), 10, "restarted: 2 s idle, RTO 300 ms");
        assert_eq!(update(false, 2000), 20, "nothing queued");
        assert_eq!(update(true, 0), 20, "the window did not change");
    }

    fn validate(t: &mut Tcb, cfg: &Config, after: Duration, packets_out: u32) {
        let mut st = TestStack::default();
        t.rtx.packets_out = packets_out;
        t.cwnd_validate(&mut st.ctx(cfg, T0 + after, false), false);
    }

    #[test]
    fn an_unfilled_window_for_an_rto_moves_halfway_to_what_was_used() {
        let cfg = cfg(true);
        let mut t = tcb(&cfg, 20, 12);
        validate(&mut t, &cfg, Duration::from_millis(100), 2);
        assert_eq!(t.cw.snd_cwnd, 20, "less than an RTO");
        assert_eq!(t.snd_cwnd_used, 2);
        validate(&mut t, &cfg, RTO, 14);
        // (20 + max(14 used, 10 initial)) / 2; ssthresh max(12, 10 + 5).
        assert_eq!((t.cw.snd_cwnd, t.cw.snd_ssthresh), (17, 15));
        assert_eq!((t.snd_cwnd_used, t.snd_cwnd_stamp), (0, T0 + RTO));
        // A window used up to what it is stays.
        let mut t = tcb(&cfg, 10, 12);
        validate(&mut t, &cfg, RTO, 3);
        assert_eq!(t.cw.snd_cwnd, 10);
    }

    #[test]
    fn application_limited_needs_open_state_room_in_the_buffer_and_the_sysctl() {
        for case in 0..5 {
            let cfg = cfg(case != 0);
            let mut t = tcb(&cfg, 20, INFINITE_SSTHRESH);
            match case {
                1 => t.ca_state = CaState::Disorder,
                2 => t.nospace = true,
                // No sk->sk_socket: an orphan, a child not yet accepted.
                3 => t.errq.dead = true,
                4 => t.parent = Some(0),
                _ => {}
            }
            validate(&mut t, &cfg, RTO, 2);
            assert_eq!(t.cw.snd_cwnd, 20, "case {case}");
            // What was used stays counted; with the sysctl on, the stamp restarts.
            assert_eq!(t.snd_cwnd_used, 2, "case {case}");
            if case != 0 {
                assert_eq!(t.snd_cwnd_stamp, T0 + RTO, "case {case}");
            }
        }
        // The same socket, accepted and open, moves halfway to the initial window.
        let cfg = cfg(true);
        let mut t = tcb(&cfg, 20, INFINITE_SSTHRESH);
        validate(&mut t, &cfg, RTO, 2);
        assert_eq!((t.cw.snd_cwnd, t.snd_cwnd_used), (15, 0));
    }

    /// `tcp_cwnd_validate`: the send-buffer-limited chrono starts only for a socket
    /// with its `struct socket` whose writer is out of buffer (`SOCK_NOSPACE`).
    #[test]
    fn sndbuf_limited_chrono_needs_the_socket() {
        let cfg = cfg(false);
        for orphan in [false, true] {
            let mut t = tcb(&cfg, 20, INFINITE_SSTHRESH);
            t.nospace = true;
            t.errq.dead = orphan;
            validate(&mut t, &cfg, Duration::from_millis(10), 2);
            let (_, _, sndbuf_limited) = t.chrono.stats_us(T0 + Duration::from_millis(20));
            assert_eq!(sndbuf_limited > 0, !orphan, "orphan {orphan}");
        }
    }

    #[test]
    fn a_cwnd_limited_flight_refreshes_the_stamp() {
        let cfg = cfg(true);
        let mut t = tcb(&cfg, 20, INFINITE_SSTHRESH);
        t.snd_cwnd_used = 5;
        let mut st = TestStack::default();
        t.rtx.packets_out = 20;
        t.cwnd_validate(&mut st.ctx(&cfg, T0 + RTO, false), true);
        assert_eq!((t.cw.snd_cwnd, t.snd_cwnd_used), (20, 0));
        assert_eq!(t.snd_cwnd_stamp, T0 + RTO);
    }
}
