//! TCP keepalive: `SO_KEEPALIVE` with `TCP_KEEPIDLE`, `TCP_KEEPINTVL` and
//! `TCP_KEEPCNT` (tcp_timer.c `tcp_keepalive_timer`, tcp.c `tcp_set_keepalive`;
//! [RFC 1122 section 4.2.3.6](https://www.rfc-editor.org/rfc/rfc1122#section-4.2.3.6)).
//!
//! After `idle` without an acceptable ACK or data from the peer, and with nothing
//! in flight or queued, the connection sends a probe (`tcp_write_wakeup`: a
//! segment one below `snd_una`, which the peer must answer with an ACK); `interval`
//! later the next, and after `probes` unanswered probes it resets the connection
//! and fails it with `ETIMEDOUT`. `TCP_USER_TIMEOUT`, when set, replaces the probe
//! count: the connection fails once it has been silent that long and a probe went
//! unanswered.

use super::consts::TCP_RESOURCE_PROBE_INTERVAL;
pub use super::sock::Keepalive;
use super::sock::Tcb;
use super::{Ctx, TcpState};
use crate::mib::Mib;
use crate::time::Instant;
use core::time::Duration;

/// `MAX_TCP_KEEPIDLE`: the largest `TCP_KEEPIDLE`, in seconds.
pub const MAX_TCP_KEEPIDLE: u32 = 32767;
/// `MAX_TCP_KEEPINTVL`: the largest `TCP_KEEPINTVL`, in seconds.
pub const MAX_TCP_KEEPINTVL: u32 = 32767;
/// `MAX_TCP_KEEPCNT`: the largest `TCP_KEEPCNT`.
pub const MAX_TCP_KEEPCNT: u8 = 127;

impl Tcb {
    /// `keepalive_time_when`.
    pub(crate) fn keepalive_time_when(&self, ctx: &Ctx) -> Duration {
        let sysctl = Duration::from_secs(ctx.cfg.tcp_keepalive_time as u64);
        self.keepalive.idle.unwrap_or(sysctl)
    }

    /// `keepalive_intvl_when`.
    pub(crate) fn keepalive_intvl_when(&self, ctx: &Ctx) -> Duration {
        let sysctl = Duration::from_secs(ctx.cfg.tcp_keepalive_intvl as u64);
        self.keepalive.interval.unwrap_or(sysctl)
    }

    /// `keepalive_probes`.
    pub(crate) fn keepalive_probes(&self, ctx: &Ctx) -> u8 {
        self.keepalive
            .probes
            .unwrap_or(ctx.cfg.tcp_keepalive_probes)
    }

    /// `keepalive_time_elapsed`: time since the last data or acceptable ACK.
    fn keepalive_time_elapsed(&self, now: Instant) -> Duration {
        let last = self.ack.lrcvtime.max(self.rcv_tstamp);
        now.saturating_since(last)
    }

    /// States the keepalive timer runs in (`tcp_keepalive_timer`): not CLOSE,
    /// LISTEN or SYN-SENT, so in SYN-RECV too for a socket that exists there (a
    /// Fast Open child, a simultaneous open), not for a listener's request (Linux's
    /// request sock has no such timer); nor TIME-WAIT (a timewait socket has none;
    /// lowtide's connection in TIME-WAIT is Linux's closed socket).
    fn keepalive_state(&self) -> bool {
        !matches!(
            self.state,
            TcpState::Closed | TcpState::Listen | TcpState::SynSent | TcpState::TimeWait
        ) && !self.is_request()
    }

    /// States `tcp_set_keepalive` arms the timer in: all but CLOSE and LISTEN (in
    /// SYN-SENT the timer then finds nothing to do; `tcp_finish_connect` arms it
    /// again).
    fn keepalive_settable(&self) -> bool {
        !matches!(
            self.state,
            TcpState::Closed | TcpState::Listen | TcpState::TimeWait
        ) && !self.is_request()
    }

    /// Replaces the keepalive settings with Linux's side effects on the timer:
    /// `tcp_set_keepalive` starts it a full idle time from now when keepalive is
    /// turned on and stops it when turned off; a new `TCP_KEEPIDLE` on an enabled
    /// socket re-arms it for what is left of the new idle time
    /// (`tcp_sock_set_keepidle_locked`).
    pub(crate) fn set_keepalive(&mut self, ctx: &Ctx, ka: Keepalive) {
        let was = self.keepalive;
        self.keepalive = ka;
        if !ka.enabled {
            self.keepalive_at = None;
            return;
        }
        if !self.keepalive_settable() {
            return;
        }
        if !was.enabled {
            self.keepalive_at = Some(ctx.now + self.keepalive_time_when(ctx));
        } else if was.idle != ka.idle {
            let left = self
                .keepalive_time_when(ctx)
                .saturating_sub(self.keepalive_time_elapsed(ctx.now));
            self.keepalive_at = Some(ctx.now + left);
        }
    }

    /// Arms the keepalive timer when a connection is established with
    /// `SO_KEEPALIVE` already on (`tcp_finish_connect`, `tcp_create_openreq_child`,
    /// which makes a Fast Open child at its SYN).
    pub(crate) fn keepalive_on_establish(&mut self, ctx: &Ctx) {
        if self.keepalive.enabled {
            self.keepalive_at = Some(ctx.now + self.keepalive_time_when(ctx));
        }
    }

    /// `tcp_keepalive_timer` for a synchronized connection.
    pub(crate) fn keepalive_timer(&mut self, ctx: &mut Ctx) {
        if !self.keepalive.enabled || !self.keepalive_state() {
            return;
        }
        let idle = self.keepalive_time_when(ctx);
        // "It is alive without keepalive": data in flight or queued has its own
        // timers (RTO, zero-window probe).
        if self.rtx.packets_out > 0 || !self.write_queue.is_empty() {
            self.keepalive_at = Some(ctx.now + idle);
            return;
        }
        let elapsed = self.keepalive_time_elapsed(ctx.now);
        if elapsed < idle {
            self.keepalive_at = Some(ctx.now + (idle - elapsed));
            return;
        }
        let timed_out = if self.icsk.user_timeout.is_zero() {
            self.icsk.probes_out >= self.keepalive_probes(ctx)
        } else {
            elapsed >= self.icsk.user_timeout && self.icsk.probes_out > 0
        };
        if timed_out {
            self.send_active_reset(ctx);
            self.keepalive_at = None;
            return self.write_err(ctx);
        }
        let next = if self.send_keepalive_probe(ctx) {
            self.icsk.probes_out = self.icsk.probes_out.saturating_add(1);
            self.keepalive_intvl_when(ctx)
        } else {
            TCP_RESOURCE_PROBE_INTERVAL
        };
        self.keepalive_at = Some(ctx.now + next);
    }

    /// `tcp_write_wakeup(sk, LINUX_MIB_TCPKEEPALIVE)`; the keepalive timer runs only
    /// with an empty write queue, so this is `tcp_xmit_probe_skb`, a bare ACK with
    /// sequence `snd_una - 1`. Returns whether it could be sent.
    fn send_keepalive_probe(&mut self, ctx: &mut Ctx) -> bool {
        self.write_wakeup(ctx, Mib::TcpExtTCPKeepAlive)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::tcp::TestStack;

    /// A socket with keepalive on (idle 2 s), silent since time zero, in `state`.
    fn tcb(cfg: &Config, state: TcpState) -> Tcb {
        let mut t = Tcb::for_test(cfg);
        t.state = state;
        (t.snd_una, t.snd_nxt, t.snd_wnd) = (1, 1, 65535);
        t.keepalive = Keepalive {
            enabled: true,
            idle: Some(Duration::from_secs(2)),
            ..Default::default()
        };
        t
    }

    /// `tcp_keepalive_timer`'s state test: SYN-RECV probes unless the socket is a
    /// listener's request; CLOSE and SYN-SENT never probe.
    #[test]
    fn keepalive_timer_runs_in_syn_recv_but_not_for_a_request() {
        let cfg = Config::default();
        let mut st = TestStack::default();
        let mut ctx = st.ctx(&cfg, Instant::ZERO + Duration::from_secs(3), false);
        let cases = [
            (TcpState::Established, None, None, true),
            (TcpState::SynRecv, Some(0), Some((0, 0)), true), // Fast Open child
            (TcpState::SynRecv, None, None, true),            // simultaneous open
            (TcpState::SynRecv, Some(0), None, false),        // request
            (TcpState::SynSent, None, None, false),
            (TcpState::Closed, None, None, false),
        ];
        for (state, parent, rsk, probes) in cases {
            let mut t = tcb(&cfg, state);
            (t.parent, t.tfo.rsk) = (parent, rsk);
            let before = ctx.mib.get(Mib::TcpExtTCPKeepAlive);
            t.keepalive_timer(&mut ctx);
            let sent = ctx.mib.get(Mib::TcpExtTCPKeepAlive) - before;
            assert_eq!(sent, probes as u64, "{state:?} {parent:?} {rsk:?}");
            assert_eq!(t.keepalive_at.is_some(), probes, "{state:?}");
        }
    }

    /// `tcp_keepalive_timer` with TCP_USER_TIMEOUT: once a probe is out and the
    /// silence reaches the user timeout, the connection ends with a reset that
    /// `__tcp_transmit_skb` counts in `tcpi_segs_out` like every skb it sends.
    #[test]
    fn user_timeout_ends_keepalive_with_a_counted_reset() {
        let cfg = Config::default();
        let mut st = TestStack::default();
        let mut t = tcb(&cfg, TcpState::Established);
        t.icsk.user_timeout = Duration::from_millis(2500);
        let mut ctx = st.ctx(&cfg, Instant::ZERO + Duration::from_secs(2), false);
        t.keepalive_timer(&mut ctx);
        assert_eq!((t.icsk.probes_out, t.segs_out), (1, 1), "the first probe");
        let mut ctx = st.ctx(&cfg, Instant::ZERO + Duration::from_secs(3), false);
        t.keepalive_timer(&mut ctx);
        assert_eq!(t.state, TcpState::Closed);
        assert_eq!(t.segs_out, 2, "the probe and the reset");
        assert_eq!(ctx.mib.get(Mib::TcpOutRsts), 1);
    }

    /// `tcp_set_keepalive` arms the timer in every state but CLOSE and LISTEN;
    /// a request has no timer.
    #[test]
    fn set_keepalive_arms_outside_close_and_listen() {
        let cfg = Config::default();
        let mut st = TestStack::default();
        let ctx = st.ctx(&cfg, Instant::ZERO, false);
        let cases = [
            (TcpState::SynSent, None, true),
            (TcpState::SynRecv, Some(0), false), // request
            (TcpState::Listen, None, false),
            (TcpState::Closed, None, false),
        ];
        for (state, parent, armed) in cases {
            let mut t = tcb(&cfg, state);
            t.parent = parent;
            let ka = t.keepalive;
            t.keepalive.enabled = false;
            t.set_keepalive(&ctx, ka);
            assert_eq!(t.keepalive_at.is_some(), armed, "{state:?} {parent:?}");
        }
        let mut t = tcb(&cfg, TcpState::SynRecv);
        (t.parent, t.tfo.rsk) = (Some(0), Some((0, 0)));
        let ka = t.keepalive;
        t.keepalive.enabled = false;
        t.set_keepalive(&ctx, ka);
        assert_eq!(t.keepalive_at, Some(Instant::ZERO + Duration::from_secs(2)));
    }
}
